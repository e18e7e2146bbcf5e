"""``python -m experiments.run SUITE``: train every row of a suite over seeds, then write its
tables (markdown + CSV) and plots.

Resumable: a run whose test metrics and predictions exist is skipped, a run with a
``last.pt`` checkpoint continues from it (``rudder.train``'s resume gives the same
metrics as an uninterrupted run), anything else starts again. Runs are trained one after the
other in this process with :func:`rudder.train.run`; their directories are
``<runs-dir>/<run_key>/seed-<s>`` (:func:`experiments.suites.run_key`), so equal rows of
different suites share their runs.
"""

from __future__ import annotations

import argparse
import json
import shlex
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

from rudder.atomic import atomic_write_text
from rudder.cli import ArgumentParser, folder, int_in
from rudder.config import MAX_EPOCHS, TrainConfig
from rudder.errors import RudderError, one_line
from rudder.optional import check_installed, config_needs
from rudder.runs.folders import resolve_dataset
from rudder.runs.layout import (
    checkpoint_file,
    config_file,
    metrics_file,
    predictions_file,
    read_config,
)

from .suites import (
    SUITES_DIR,
    Row,
    Suite,
    SuiteError,
    config_changes,
    load_suite,
    row_config,
    row_data,
    run_key,
    suite_names,
)

DEFAULT_RUNS_DIR = Path("runs") / "experiments"
DEFAULT_OUTPUT = Path("experiments") / "results"
TIMING_FILE = "timing.json"


@dataclass
class Job:
    """One training run: a row of the suite with one seed."""

    row: Row
    seed: int
    config: TrainConfig
    run_dir: Path
    settings: dict = field(default_factory=dict)  # chosen by experiments.tune, applied to config

    @property
    def status(self) -> str:
        """``done`` (test metrics written), ``resume`` (a last.pt exists), ``new``, or ``stale``
        (the run's saved config.yaml differs from the row's config: see :meth:`changes`)."""
        if self.changes():
            return "stale"
        tested = predictions_file(self.run_dir, "test").is_file()
        if tested and metrics_file(self.run_dir).is_file():
            return "done"
        if checkpoint_file(self.run_dir, "last").is_file():
            return "resume"
        return "new"

    def changes(self) -> list[str]:
        if not config_file(self.run_dir).is_file():
            return []
        return config_changes(read_config(self.run_dir), self.config)


def suite_parser(prog: str, description: str) -> argparse.ArgumentParser:
    """The arguments experiments.run and experiments.tune share: suite, dataset and folders."""
    parser = ArgumentParser(
        prog=prog,
        description=description,
        epilog=f"Suites: {', '.join(suite_names())}. See experiments/README.md.",
    )
    parser.add_argument("suite", help="suite name (a folder of experiments/suites)")
    parser.add_argument(
        "--dataset",
        help="dataset folder (required by the real-dataset suites; "
        "replaces data.dataset of every row)",
    )
    parser.add_argument(
        "--output",
        type=folder,
        default=DEFAULT_OUTPUT,
        help=f"folder for the tables, plots and tuned settings (default {DEFAULT_OUTPUT})",
    )
    parser.add_argument(
        "--runs-dir",
        type=folder,
        default=DEFAULT_RUNS_DIR,
        help=f"folder of the run directories (default {DEFAULT_RUNS_DIR}, gitignored)",
    )
    parser.add_argument(
        "--suites-dir",
        type=folder,
        default=SUITES_DIR,
        help="folder of suite folders (default: experiments/suites)",
    )
    parser.add_argument(
        "--dry-run", action="store_true", help="print the plan (runs and their status) and stop"
    )
    return parser


def build_parser() -> argparse.ArgumentParser:
    parser = suite_parser(
        f"python -m {__package__}.run",
        "Reproduce a paper table: train each row over seeds (resuming finished runs), "
        "then write markdown/CSV tables with bootstrap intervals and Wilcoxon tests, and plots.",
    )
    parser.add_argument("--seeds", type=int_in(1, 1000), default=3,
                        help="seeds 0..N-1 per row (default 3)")
    parser.add_argument(
        "--epochs", type=int_in(1, MAX_EPOCHS),
        help="override every row's epochs (a shorter schedule)"
    )
    parser.add_argument(
        "--tuned",
        type=Path,
        help="hyper-parameters chosen by experiments.tune (default, for a suite with a tune "
        "section: <output>/<suite>-tuned.yaml)",
    )
    parser.add_argument(
        "--untuned",
        action="store_true",
        help="ignore the suite's tuning and train every row with its YAML's settings",
    )
    return parser


def plan(
    suite: Suite,
    seeds: int,
    runs_dir: Path,
    dataset: str | None = None,
    epochs: int | None = None,
    tuned: Path | None = None,
) -> list[Job]:
    """Every (row, seed) of the suite with its resolved config and run directory; with
    ``tuned`` (a file of :mod:`experiments.tune`), each row takes its chosen settings."""
    if suite.requires_dataset and dataset is None:
        raise SuiteError(
            f"suite {suite.name!r} runs on a real dataset and needs --dataset DIR: "
            f"{suite.requires_dataset}"
        )
    if seeds < 1:
        raise SuiteError(f"--seeds must be at least 1, got {seeds}")
    if epochs is not None and epochs < 1:
        raise SuiteError(f"--epochs must be at least 1, got {epochs}")
    fingerprints, base_keys = {}, {}
    for row in suite.rows:
        spec = row_config(row, dataset, epochs, seed=0).data.dataset
        if spec not in fingerprints:
            fingerprints[spec] = resolve_dataset(spec).fingerprint()
        base_keys[row.label] = run_key(row_data(row, dataset), fingerprints[spec])
    settings = {}
    if tuned is not None:
        from .tune import load_tuned

        settings = load_tuned(tuned, suite, base_keys)
    jobs = []
    for row in suite.rows:
        chosen = settings.get(row.label)
        spec = row_config(row, dataset, epochs, seed=0).data.dataset
        key = run_key(row_data(row, dataset, epochs, chosen), fingerprints[spec])
        for seed in range(seeds):
            config = row_config(row, dataset, epochs, seed, chosen)
            run_dir = Path(runs_dir) / key / f"seed-{seed}"
            jobs.append(Job(row, seed, config, run_dir, dict(chosen or {})))
    return jobs


def train_job(job: Job, fit=None) -> float:
    """Train (or resume) one run with ``fit`` (default :func:`rudder.train.run`: train, then
    test); adds its wall-clock and CPU seconds (all threads of this process) to
    ``timing.json``."""
    from rudder.train import run

    status = job.status
    if status == "done":
        return 0.0
    start, cpu_start = time.perf_counter(), time.process_time()
    (fit or run)(job.config, job.run_dir, resume=status == "resume", overwrite=status == "new")
    seconds, cpu = time.perf_counter() - start, time.process_time() - cpu_start
    timing_path = job.run_dir / TIMING_FILE
    previous = json.loads(timing_path.read_text()) if timing_path.is_file() else {}
    timing = {
        "seconds": previous.get("seconds", 0.0) + seconds,
        "cpu_seconds": previous.get("cpu_seconds", 0.0) + cpu,
        "sessions": previous.get("sessions", 0) + 1,
    }
    atomic_write_text(timing_path, json.dumps(timing))
    return seconds


def run_timing(job: Job) -> dict:
    """Recorded ``seconds`` and ``cpu_seconds`` of a run (empty when trained outside the runner)."""
    path = job.run_dir / TIMING_FILE
    return json.loads(path.read_text()) if path.is_file() else {}


def command_line(argv: list[str]) -> str:
    return "python -m experiments.run " + " ".join(shlex.quote(a) for a in argv)


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    args = build_parser().parse_args(argv)
    try:
        suite = load_suite(args.suite, args.suites_dir)
        tuned = None
        if not args.untuned and (suite.tune is not None or args.tuned is not None):
            from .tune import tuned_path

            tuned = args.tuned or tuned_path(args.output, suite.name)
        jobs = plan(suite, args.seeds, args.runs_dir, args.dataset, args.epochs, tuned)
    except (SuiteError, RudderError) as error:
        print(f"error: {one_line(error)}", file=sys.stderr)
        return 2
    print(
        f"suite {suite.name}: {len(suite.rows)} rows x {args.seeds} seeds"
        + (f", settings from {tuned}" if tuned else ", the rows' own settings")
    )
    for job in jobs:
        print(f"  [{job.status:6}] {job.row.label:24} seed {job.seed}  {job.run_dir}")
    if args.dry_run:
        return 0
    stale = [job for job in jobs if job.status == "stale"]
    if stale:
        details = "; ".join(f"{j.run_dir}: {', '.join(j.changes())}" for j in stale)
        print(
            f"error: {len(stale)} run(s) were trained with other settings than their row now has "
            f"({details}); delete those run directories to train them again",
            file=sys.stderr,
        )
        return 2
    try:  # every optional package the rows train with, before the first row
        check_installed(need for job in jobs if job.status != "done"
                        for need in config_needs(job.config))
    except RudderError as error:
        print(f"error: {one_line(error)}", file=sys.stderr)
        return 2
    for i, job in enumerate(jobs, 1):
        if job.status == "done":
            continue
        print(
            f"[{i}/{len(jobs)}] training {job.row.label} seed {job.seed} -> {job.run_dir}",
            flush=True,
        )
        try:
            seconds = train_job(job)
        except RudderError as error:
            print(f"error: {job.row.path}: {one_line(error)}", file=sys.stderr)
            return 2
        print(f"[{i}/{len(jobs)}] done in {seconds:.0f} s", flush=True)
    from .suite_report import write_report

    try:
        written = write_report(suite, jobs, args.output, command_line(argv), args.runs_dir)
    except (ValueError, OSError) as error:  # RudderError, SuiteError, the tables' checks
        print(f"error: the report of suite {suite.name}: {one_line(error)}", file=sys.stderr)
        return 2
    for path in written:
        print(f"written {path}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
