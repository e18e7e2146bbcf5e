"""``python -m experiments.calibrate``: how often each test says "A differs from B" when A and
B are the same configuration trained with disjoint seeds (the false-positive rate at
p < 0.05, which should be about 5%).

A pool of training runs of one row (default: rudder-table1's MM with its tuned settings,
seeds 0..39; the suite's own seeds are the first of them) is trained like any suite run
(resumable), their per-query ranks are written to
``experiments/results/calibration-ranks.npz`` (:mod:`experiments.archive`), and
``calibration.md`` / ``calibration.csv`` are computed from it by
:mod:`experiments.calibration` (``python -m experiments.report calibration [--check]``
recomputes them).
"""

from __future__ import annotations

import argparse
import dataclasses
import sys

from rudder.atomic import atomic_write_text
from rudder.cli import int_in
from rudder.errors import RudderError, one_line

from .archive import archive_path, write_archive
from .calibration import ARM_SIZES, NAME, render_calibration
from .suite_cli import suite_parser
from .suites import SuiteError, load_suite


def build_parser() -> argparse.ArgumentParser:
    parser = suite_parser(
        f"python -m {__package__}.calibrate",
        "Train a pool of runs of one row (disjoint seeds) and measure how often each test "
        "rejects between two sets of them (the same configuration): its false-positive rate.",
        default_suite="rudder-table1",
    )
    parser.add_argument("--row", default="MM", help="the row whose runs form the pool (MM)")
    parser.add_argument("--pool", type=int_in(4, 1000), default=40,
                        help="runs in the pool: seeds 0..N-1 (default 40)")
    parser.add_argument("--partitions", type=int_in(1, 1000), default=10,
                        help="random partitions of the pool into pairs (default 10: 20 pairs "
                        "of 10 + 10 runs from 40)")
    return parser


def main(argv: list[str] | None = None) -> int:
    from .run import plan, train_job
    from .suite_report import collect_rows, header, run_records, runs_at_epoch_cap
    from .tune import tuned_path

    argv = list(sys.argv[1:] if argv is None else argv)
    args = build_parser().parse_args(argv)
    try:
        suite = load_suite(args.suite, args.suites_dir)
        rows = [r for r in suite.rows if r.label == args.row]
        if not rows:
            raise SuiteError(f"suite {suite.name!r} has no row {args.row!r}")
        single = dataclasses.replace(suite, rows=tuple(rows), fusions=(), comparisons=(),
                                     best_of=())
        tuned = tuned_path(args.output, suite.name) if suite.tune is not None else None
        jobs = plan(single, args.pool, args.runs_dir, args.dataset, tuned=tuned)
    except (SuiteError, RudderError) as error:
        print(f"error: {one_line(error)}", file=sys.stderr)
        return 2
    todo = [job for job in jobs if job.status != "done"]
    print(f"calibration pool: {args.row} of {suite.name}, {len(jobs)} runs, {len(todo)} to train")
    if args.dry_run:
        return 0
    for i, job in enumerate(todo, 1):
        print(f"[{i}/{len(todo)}] training {job.row.label} seed {job.seed}", flush=True)
        try:
            train_job(job)
        except RudderError as error:
            print(f"error: {one_line(error)}", file=sys.stderr)
            return 2
    from rudder.data.lookup import resolve_dataset

    from .collect import EvalSplits

    try:
        collected, behind = collect_rows(single, jobs, args.runs_dir, EvalSplits())
        command = "python -m experiments.calibrate " + " ".join(argv)
        capped = runs_at_epoch_cap([job.run_dir for job in jobs])
        text = header(single, jobs, command, None, jobs[0].config.selection, capped, collected)
        text = "\n".join(line for line in text.splitlines()  # no table here: no table notes
                          if not line.startswith(("- **Reproduces**", "Cells:")))
        sizes = [k for k in ARM_SIZES if 2 * k <= args.pool]
        meta = {"suite": NAME, "rows": [args.row], "comparisons": [], "header": text.replace(
            f"# {single.title}", f"# Calibration: {args.row} of {suite.name} against itself", 1),
            "notes": [
                (f"Pairs: for each arm size, {args.partitions} random partitions of the pool of "
                f"{args.pool} runs into disjoint pairs (seeded); the pairs of one partition are "
                "independent (no shared run), pairs of different partitions share runs, so the "
                "intervals (Clopper-Pearson, as if all pairs were independent) are too narrow. "
                "The seed-paired Wilcoxon tests pair the two sets' runs in order. Per pair: "
                "calibration.csv; recompute with `python -m experiments.report calibration`.")],
            "arm_sizes": sizes, "partitions": args.partitions, "seed": 0}
        fingerprint = resolve_dataset(jobs[0].config.data.dataset).fingerprint()
        write_archive(archive_path(args.output, NAME), collected,
                      run_records(single, collected, behind), fingerprint, meta)
        for file, text in render_calibration(args.output).items():
            print(f"written {atomic_write_text(args.output / file, text)}")
    except (ValueError, OSError) as error:
        print(f"error: the calibration report: {one_line(error)}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
