"""``python -m experiments.calibrate``: how often each test says "A differs from B" when A and
B are the same configuration trained with disjoint seeds (the false-positive rate at
p < 0.05, which should be about 5%).

A pool of training runs of one row (default: rudder-table1's MM with its tuned settings,
seeds 0..39; the suite's own seeds are the first of them) is trained like any suite run
(resumable), their per-query ranks are written to
``experiments/results/calibration-ranks.npz`` (:mod:`experiments.archive`), and
``calibration.md`` / ``calibration.csv`` are computed from it (``python -m
experiments.report calibration [--check]``).

Pairs: for each arm size k (the suites' 10 seeds per row, and the 5 of the real-dataset
suites), ``partitions`` seeded random permutations of the pool, each cut into pool // (2k)
pairs of disjoint k-run sets: the pairs of one partition share no run, pairs of different
partitions may. Every pair is tested in both directions with each test of the tables
(:func:`experiments.tables.compare`): runs x videos
(:func:`rudder.evaluation.significance.crossed_random_effects_test`), the two-level
bootstrap, and, pairing the two sets' runs in order as if they were the same seeds, the
per-video and per-caption Wilcoxon tests. The rate of p < 0.05 is reported with a 95%
Clopper-Pearson interval computed as if the tests were independent (within a partition they
are; across partitions they share runs, so the interval is too narrow).
"""

from __future__ import annotations

import argparse
import csv
import dataclasses
import io
import sys
from pathlib import Path

import numpy as np

from rudder.cli import int_in
from rudder.errors import RudderError, one_line

from . import tables
from .archive import archive_path, read_archive, write_archive
from .collect import DIRECTIONS, RowResult
from .suite_cli import suite_parser
from .suites import SuiteError, load_suite

NAME = "calibration"
ALPHA = 0.05
ARM_SIZES = (10, 5)
TESTS = {
    "p_runs": "runs x videos (crossed random effects)",
    "p_boot": "two-level bootstrap (runs, then videos)",
    "p_video": "per video, seeds taken as fixed (Wilcoxon)",
    "p_caption": "per caption, seeds taken as fixed (Wilcoxon, t2v only)",
}


def pairs(pool: int, per_arm: int, partitions: int, seed: int) -> list[tuple[list, list, int]]:
    """``(indices of A, indices of B, partition)``: per partition a seeded permutation of the
    pool cut into disjoint (A, B) pairs of ``per_arm`` runs each."""
    if 2 * per_arm > pool:
        raise ValueError(f"a pool of {pool} runs holds no pair of {per_arm} + {per_arm} runs")
    rng = np.random.default_rng([seed, per_arm])
    out = []
    for partition in range(partitions):
        order = rng.permutation(pool)
        for i in range(pool // (2 * per_arm)):
            block = order[2 * i * per_arm:2 * (i + 1) * per_arm]
            out.append((sorted(block[:per_arm].tolist()), sorted(block[per_arm:].tolist()),
                        partition))
    return out


def _subset(row: RowResult, index: list[int], label: str) -> RowResult:
    """The row's runs ``index`` as a row of their own, their seeds renumbered 0..k-1 (so the
    seed-paired tests pair the two sets' runs in order)."""
    return RowResult(label, list(range(len(index))), [],
                     {d: row.ranks[d][index] for d in DIRECTIONS}, {}, row.query_ids,
                     video_ids=row.video_ids)


def clopper_pearson(k: int, n: int, confidence: float = 0.95) -> tuple[float, float]:
    """Exact binomial interval of k successes in n trials (Clopper & Pearson 1934)."""
    from scipy.stats import beta

    a = (1 - confidence) / 2
    low = 0.0 if k == 0 else float(beta.ppf(a, k, n - k + 1))
    high = 1.0 if k == n else float(beta.ppf(1 - a, k + 1, n - k))
    return low, high


def pair_tests(row: RowResult, meta: dict) -> list[dict]:
    """Every pair of every arm size tested in both directions (:func:`pairs`)."""
    results = []
    pool = len(row.seeds)
    for per_arm in meta["arm_sizes"]:
        for n, (a, b, partition) in enumerate(pairs(pool, per_arm, meta["partitions"],
                                                    meta["seed"])):
            first, second = _subset(row, a, "A"), _subset(row, b, "B")
            for d in DIRECTIONS:
                test = tables.compare(first, second, d)
                results.append({"per_arm": per_arm, "pair": n, "partition": partition,
                                "direction": d, "seeds_a": [row.seeds[i] for i in a],
                                "seeds_b": [row.seeds[i] for i in b],
                                **{key: test[key] for key in (*TESTS, "diff")}})
    return results


def render_calibration(output: Path) -> dict[str, str]:
    """``calibration.md`` and ``calibration.csv`` from ``calibration-ranks.npz``."""
    rows, meta = read_archive(archive_path(output, NAME))
    row = rows[meta["rows"][0]]
    results = pair_tests(row, meta)
    lines = [meta["header"].rstrip(), "", "## False-positive rate at p < 0.05", "",
             ("| test | direction | runs per arm | pairs (independent) | p < 0.05 | rate "
             "[95% CI] | p < 0.10 |"), "|---|---|---|---|---|---|---|"]
    for key, title in TESTS.items():
        for per_arm in meta["arm_sizes"]:
            for d in DIRECTIONS:
                ps = [r[key] for r in results if r["per_arm"] == per_arm
                      and r["direction"] == d and not np.isnan(r[key])]
                if not ps:
                    continue
                independent = len(row.seeds) // (2 * per_arm)
                hits = sum(p < ALPHA for p in ps)
                low, high = clopper_pearson(hits, len(ps))
                tenth = sum(p < 2 * ALPHA for p in ps)
                lines.append(f"| {title} | {d} | {per_arm} | {len(ps)} ({independent}) | {hits} | "
                             f"{100 * hits / len(ps):.0f}% [{100 * low:.0f}, {100 * high:.0f}] | "
                             f"{100 * tenth / len(ps):.0f}% |")
    lines += ["", *meta.get("notes", ()), ""]
    buffer = io.StringIO()
    writer = csv.writer(buffer, lineterminator="\n")
    keys = ("per_arm", "pair", "partition", "direction", "seeds_a", "seeds_b", "diff",
            *TESTS)
    writer.writerow(keys)
    for r in results:
        writer.writerow([" ".join(map(str, r[k])) if isinstance(r[k], list)
                         else tables._num(r[k]) for k in keys])
    return {f"{NAME}.md": "\n".join(lines), f"{NAME}.csv": buffer.getvalue()}


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
    from . import report
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
        for path in report.write(NAME, args.output):
            print(f"written {path}")
    except (ValueError, OSError) as error:
        print(f"error: the calibration report: {one_line(error)}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
