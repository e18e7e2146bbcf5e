"""Speed targets of rudder.evaluation.metrics against the reference code; exits 1 on a miss.

- t2v + v2t retrieval metrics on a 10,000 x 10,000 float32 matrix: at most 0.10x the time of
  Collaborative Experts' ``t2v_metrics`` + ``v2t_metrics``;
- nDCG + mAP on a 9,668 x 3,842 float32 matrix (the EPIC-KITCHENS-100 multi-instance
  retrieval test size) with graded relevance, both from one ranking
  (:func:`rudder.evaluation.metrics.relevance_metrics`): at most 0.10x the time of the EPIC
  code's ``calculate_nDCG`` + ``calculate_mAP``. The two separate calls (``ndcg`` and
  ``mean_average_precision``, each ranking again) are timed beside it, without a target.

The ratio depends on the CPU and numpy build (numpy's SIMD sorts speed up the reference's
argsorts on AVX-512 CPUs; rudder picks its float32 ranking by timing both of its rankings
once per process), so the script prints the machine, the numpy version and the ranking used.

The references are re-implemented in ``reference_metrics.py``. Outputs must be equal: R@K,
MdR, MnR and the geometric mean exactly; nDCG and mAP to a relative 1e-6 (the EPIC code
accumulates the relevance in float32). The nDCG/mAP scores have no tied values within a row
(the EPIC code's order of tied scores is unspecified, rudder's is by column); the rank
matrix has the ties of random float32 normals, which both sides average.

Times are process CPU time, best of ``--repeat`` runs of each side (the machine may be
shared; on an idle core wall and CPU time agree). Exit codes: 0 every target met; 1 a speed
target missed; 3 rudder's outputs differ from the reference's (whatever the speed). Run
single-threaded:

    OMP_NUM_THREADS=1 python benchmarks/bench_metrics.py [--repeat 2]
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
import reference_metrics as reference
from machine import machine_line

from rudder.evaluation import metrics

TARGETS = {"ranks": 0.10, "relevance": 0.10}
MISSED, DIFFERENT = 1, 3  # exit codes
VERDICTS = {0: "OK", MISSED: "MISSED", DIFFERENT: "OUTPUTS DIFFER"}


def best_time(fn, repeat: int):
    """(result, best process CPU seconds over ``repeat`` calls)."""
    best, result = float("inf"), None
    for _ in range(repeat):
        start = time.process_time()
        result = fn()
        best = min(best, time.process_time() - start)
    return result, best


def rank_case(rng):
    n = 10_000
    sims = rng.standard_normal((n, n), dtype=np.float32)
    sims[np.arange(n), np.arange(n)] += 2.0  # a model better than chance

    def ours():
        return [metrics.retrieval_metrics(sims, direction=d) for d in ("t2v", "v2t")]

    def theirs():
        return [reference.ce_t2v_metrics(sims), reference.ce_v2t_metrics(sims)]

    return ours, theirs


def relevance_case(rng):
    rows, cols = 9_668, 3_842
    sims = rng.permuted(np.tile(np.arange(cols, dtype=np.float32), (rows, 1)), axis=1)
    relevance = rng.random((rows, cols), dtype=np.float32)
    relevance[relevance < 0.8] = 0  # ~20% partially relevant items, ~1% fully relevant
    relevance[relevance > 0.99] = 1

    def ours():
        result = metrics.relevance_metrics(sims, relevance)
        return [result["nDCG"], result["mAP"]]

    def theirs():
        return [reference.epic_ndcg(sims, relevance), reference.epic_map(sims, relevance)]

    def separately():
        return [metrics.ndcg(sims, relevance), metrics.mean_average_precision(sims, relevance)]

    ours.separately = separately
    return ours, theirs


def equal(name: str, ours, theirs) -> bool:
    if name == "ranks":
        return ours == theirs
    return bool(np.allclose(ours, theirs, rtol=1e-6, atol=0))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--repeat", type=int, default=2, help="runs of each side (the best counts)")
    args = parser.parse_args(argv)
    rng = np.random.default_rng(0)
    print(machine_line())
    ranking = metrics._float32_ranking().__name__.removeprefix("_ranking_by_")
    print(f"float32 ranking of nDCG/mAP chosen on this machine: {ranking}")
    codes = set()
    for name, label, make in (
        ("ranks", "t2v+v2t 10000x10000 vs CE metric.py", rank_case),
        ("relevance", "nDCG+mAP 9668x3842 vs EPIC MIR code", relevance_case),
    ):
        ours, theirs = make(rng)
        got, ours_s = best_time(ours, args.repeat)
        expected, theirs_s = best_time(theirs, args.repeat)
        same = equal(name, got, expected)
        separately = getattr(ours, "separately", None)
        if separately is not None:
            got_apart, apart_s = best_time(separately, args.repeat)
            same_apart = equal(name, got_apart, expected)
            same &= same_apart
        ratio = ours_s / theirs_s
        code = DIFFERENT if not same else 0 if ratio <= TARGETS[name] else MISSED
        codes.add(code)
        print(
            f"{label}: rudder {ours_s:.3f} s, reference {theirs_s:.3f} s, ratio {ratio:.3f}x "
            f"(target <= {TARGETS[name]:.2f}x), outputs equal: {same} -> "
            f"{VERDICTS[code]}"
        )
        if separately is not None:
            print(f"  the two public functions called separately (two rankings): {apart_s:.3f} s, "
                  f"ratio {apart_s / theirs_s:.3f}x (no target), outputs equal: {same_apart}")
    return max(codes)


if __name__ == "__main__":
    sys.exit(main())
