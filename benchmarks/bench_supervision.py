"""Benchmark: relevance matrix of 10,000 captions x 10,000 videos in under 5 s.

Realistic class sets: 300 noun classes, 100 verb classes, 1-4 nouns and 0-2 verbs per
caption (videos likewise). Prints one result line; exits 1 when the target is missed.
Usage: ``python benchmarks/bench_supervision.py [--n 10000] [--target 5.0]``.
"""

from __future__ import annotations

import argparse
import sys
import time

import torch

from rudder.supervision import relevance


def random_sets(
    n: int, classes: int, low: int, high: int, generator: torch.Generator
) -> torch.Tensor:
    """``(n, classes)`` multi-hot rows with ``low..high`` distinct classes each."""
    sizes = torch.randint(low, high + 1, (n,), generator=generator)
    ranks = torch.rand(n, classes, generator=generator).argsort(dim=1).argsort(dim=1)
    return (ranks < sizes.unsqueeze(1)).to(torch.float32)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=10_000, help="captions and videos (default 10000)")
    parser.add_argument("--target", type=float, default=5.0, help="seconds (default 5)")
    args = parser.parse_args(argv)
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
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
