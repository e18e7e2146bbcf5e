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
import shlex
import sys
from pathlib import Path

from rudder.cli import int_in
from rudder.config import MAX_EPOCHS
from rudder.data.lookup import resolve_dataset
from rudder.errors import RudderError, one_line
from rudder.optional import check_installed, config_needs

from .jobs import Job, train_job
from .suite_cli import suite_parser
from .suites import (
    Suite,
    SuiteError,
    load_suite,
    row_config,
    row_data,
    run_key,
)


def build_parser() -> argparse.ArgumentParser:
    parser = suite_parser(
        f"python -m {__package__}.run",
        "Reproduce a paper table: train each row over seeds (resuming finished runs), "
        "then write markdown/CSV tables with bootstrap intervals and Wilcoxon tests, and plots.",
    )
    parser.add_argument("--seeds", type=int_in(1, 1000),
                        help="seeds 0..N-1 per row (default: the suite's `seeds`, else 5)")
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
        seeds = args.seeds or suite.seeds
        jobs = plan(suite, seeds, args.runs_dir, args.dataset, args.epochs, tuned)
    except (SuiteError, RudderError) as error:
        print(f"error: {one_line(error)}", file=sys.stderr)
        return 2
    print(
        f"suite {suite.name}: {len(suite.rows)} rows x {seeds} seeds"
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
