"""Benchmarks of the supervision's precomputations; exits 1 when a target is missed.

1. Relevance matrix of 10,000 captions x 10,000 videos in under 5 s.
2. ``positive_sampling: relevant``: one epoch of draws (every training caption once as the
   query, batches of 128, :class:`rudder.supervision.RelevantCaptionSampler` built first)
   at 10,000, 30,000 and 100,000 captions (the best of ``--repeat`` epochs each); target:
   linear, the 100,000-caption epoch at most 1.5 x 10 times the 10,000-caption one. The
   full-row draw it replaced (a row of relevance per query, ``O(N^2)`` per epoch) is timed
   beside it up to 30,000 captions.
3. ``hn_exclusion``'s dataset threshold (``CaptionSimilarity.top_fraction_threshold``, top
   1% of caption pairs) at 10,000 captions (exact) and 100,000 (sampled); no target.

Realistic class sets: 300 noun classes, 100 verb classes, 1-4 nouns and 0-2 verbs per
caption (videos likewise). Times are process CPU time (the machine may be shared).
Usage: ``python benchmarks/bench_supervision.py [--n 10000] [--target 5.0]
[--epoch-sizes 10000 30000 100000]``.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import numpy as np
import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))
from machine import machine_line

from rudder.supervision import RelevantCaptionSampler, relevance
from rudder.text.similarity import CaptionSimilarity

BATCH, LINEAR_SLACK = 128, 1.5
WORDS = ["fold", "the", "paper", "boat", "cut", "bottle", "paint", "car", "clay", "make", "a",
         "toy", "with", "glue", "stick", "कागद", "दुमडा", "नाव", "बाटली", "कापा", "காகிதம்", "கார்"]


def random_sets(
    n: int, classes: int, low: int, high: int, generator: torch.Generator
) -> torch.Tensor:
    """``(n, classes)`` multi-hot rows with ``low..high`` distinct classes each."""
    sizes = torch.randint(low, high + 1, (n,), generator=generator)
    ranks = torch.rand(n, classes, generator=generator).argsort(dim=1).argsort(dim=1)
    return (ranks < sizes.unsqueeze(1)).to(torch.float32)


def cpu_seconds(fn) -> tuple[object, float]:
    start = time.process_time()
    result = fn()
    return result, time.process_time() - start


def relevant_epoch(n: int, full_rows: bool, repeat: int = 1) -> float:
    """CPU seconds of one epoch of relevant-positive draws over ``n`` captions (the best of
    ``repeat`` epochs)."""
    generator = torch.Generator().manual_seed(0)
    nouns, verbs = random_sets(n, 300, 1, 4, generator), random_sets(n, 100, 0, 2, generator)
    weights = torch.ones(n, dtype=torch.float64)

    def epoch():
        sampler = None if full_rows else RelevantCaptionSampler(nouns, verbs, weights, 0.1)
        for start in range(0, n, BATCH):
            rows = slice(start, start + BATCH)
            if full_rows:  # what the sampler replaced
                candidates = relevance(nouns[rows], verbs[rows], nouns, verbs) > 0.1
                torch.multinomial(candidates.double() * weights + 1e-300, 1, generator=generator)
            else:
                sampler.draw(nouns[rows], verbs[rows], generator)

    return min(cpu_seconds(epoch)[1] for _ in range(repeat))


def threshold_seconds(n: int) -> tuple[float, float]:
    rng = np.random.default_rng(0)
    texts = [" ".join(rng.choice(WORDS, rng.integers(3, 9))) for _ in range(n)]
    similarity = CaptionSimilarity().fit(texts)
    return cpu_seconds(lambda: similarity.top_fraction_threshold(texts, 0.01))


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=10_000, help="captions and videos (default 10000)")
    parser.add_argument("--target", type=float, default=5.0, help="seconds (default 5)")
    parser.add_argument("--epoch-sizes", type=int, nargs="+", default=[10_000, 30_000, 100_000])
    parser.add_argument("--repeat", type=int, default=3, help="epochs per size (the best counts)")
    parser.add_argument("--full-rows-up-to", type=int, default=30_000,
                        help="time the replaced full-row draw up to this size")
    args = parser.parse_args(argv)
    print(machine_line())
    generator = torch.Generator().manual_seed(0)
    nouns_a, nouns_b = (random_sets(args.n, 300, 1, 4, generator) for _ in range(2))
    verbs_a, verbs_b = (random_sets(args.n, 100, 0, 2, generator) for _ in range(2))
    start = time.perf_counter()
    out = relevance(nouns_a, verbs_a, nouns_b, verbs_b)
    seconds = time.perf_counter() - start
    ok = seconds < args.target and out.shape == (args.n, args.n) and bool(torch.isfinite(out).all())
    print(
        f"relevance {args.n}x{args.n} (300 noun / 100 verb classes, "
        f"{torch.get_num_threads()} threads): "
        f"{seconds:.2f} s, target < {args.target:g} s -> {'OK' if ok else 'MISSED'}"
    )
    sizes = sorted(args.epoch_sizes)
    epochs = {n: relevant_epoch(n, full_rows=False, repeat=args.repeat) for n in sizes}
    for n, seconds in epochs.items():
        line = f"relevant positives, one epoch of {n:,} captions: {seconds:.2f} s CPU"
        if n <= args.full_rows_up_to:
            line += f" (full-row draw: {relevant_epoch(n, full_rows=True):.2f} s)"
        print(line)
    growth = epochs[sizes[-1]] / epochs[sizes[0]]
    allowed = LINEAR_SLACK * sizes[-1] / sizes[0]
    linear = growth <= allowed
    print(f"relevant positives: {sizes[-1]:,} / {sizes[0]:,} captions took {growth:.1f}x the "
          f"time (linear: {sizes[-1] / sizes[0]:g}x, target <= {allowed:g}x) -> "
          f"{'OK' if linear else 'MISSED'}")
    for n in (sizes[0], sizes[-1]):
        value, seconds = threshold_seconds(n)
        pairs = n * (n - 1) // 2
        print(f"hn_exclusion threshold (top 1% of {pairs:,} caption pairs, "
              f"{'exact' if pairs <= (1 << 26) else 'sampled'}): {value:.4f} in {seconds:.2f} s "
              "CPU")
    return 0 if ok and linear else 1


if __name__ == "__main__":
    sys.exit(main())
