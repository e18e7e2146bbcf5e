"""Speed targets of rudder.metrics (issue 2): prints one line per target, exits 1 on a miss.

- t2v + v2t retrieval metrics on a 10,000 x 10,000 float32 matrix: under 3 s;
- nDCG + mAP on a 10,000 x 4,000 float32 matrix with graded relevance: under 5 s.

Run single-threaded (``OMP_NUM_THREADS=1 python benchmarks/bench_metrics.py``). Both wall
and process CPU time are printed; the target is checked on CPU time because the machine is
shared by other jobs (on an idle core the two agree). ``--wall`` checks wall time instead.
"""

from __future__ import annotations

import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from rudder import metrics


def timed(fn):
    wall, cpu = time.perf_counter(), time.process_time()
    result = fn()
    return result, time.perf_counter() - wall, time.process_time() - cpu


def main(argv: list[str] | None = None) -> int:
    use_wall = "--wall" in (sys.argv[1:] if argv is None else argv)
    rng = np.random.default_rng(0)
    n = 10_000
    sims = rng.standard_normal((n, n), dtype=np.float32)
    sims[np.arange(n), np.arange(n)] += 2.0  # a model better than chance
    _, wall_r, cpu_r = timed(
        lambda: (
            metrics.retrieval_metrics(sims, direction="t2v"),
            metrics.retrieval_metrics(sims, direction="v2t"),
        )
    )
    del sims

    rows, cols = 10_000, 4_000
    sims = rng.standard_normal((rows, cols), dtype=np.float32)
    relevance = rng.random((rows, cols), dtype=np.float32)
    relevance[relevance < 0.8] = 0  # ~20% partially relevant items, ~1% fully relevant
    relevance[relevance > 0.99] = 1
    _, wall_m, cpu_m = timed(
        lambda: (metrics.ndcg(sims, relevance), metrics.mean_average_precision(sims, relevance))
    )

    failed = False
    for label, wall, cpu, target in (
        ("t2v+v2t 10000x10000", wall_r, cpu_r, 3.0),
        ("nDCG+mAP 10000x4000", wall_m, cpu_m, 5.0),
    ):
        measured = wall if use_wall else cpu
        ok = measured < target
        failed |= not ok
        print(
            f"{label}: wall {wall:.2f} s, cpu {cpu:.2f} s (target < {target:.0f} s on "
            f"{'wall' if use_wall else 'cpu'}) {'OK' if ok else 'MISSED'}"
        )
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
