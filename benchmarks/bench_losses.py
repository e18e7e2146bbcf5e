"""Forward + backward time of every loss at B = 256 on CPU (2 threads).

Targets: under 20 ms per loss, under 60 ms for ``ot`` (20 Sinkhorn iterations),
judged on the median of ``--repeats`` runs after 3 warm-ups; the minimum is printed too
(on a shared machine it shows the cost without interference). Prints a table and a
result line; exits 1 when a target is missed.

    python benchmarks/bench_losses.py [--batch 256] [--repeats 30] [--threads 2]
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time

import torch

from rudder import losses

TARGET_MS = {"ot": 60.0}
DEFAULT_TARGET_MS = 20.0


def _inputs(batch: int, seed: int = 0) -> dict:
    """A realistic batch: cosine similarities of unit vectors and the side matrices."""
    gen = torch.Generator().manual_seed(seed)
    text = torch.nn.functional.normalize(torch.randn(batch, 256, generator=gen), dim=1)
    video = torch.nn.functional.normalize(text + 0.8 * torch.randn(batch, 256, generator=gen),
                                          dim=1)
    relevance = torch.rand(batch, batch, generator=gen).pow(4)
    relevance.fill_diagonal_(1.0)
    labels = torch.randint(0, 4, (batch, batch), generator=gen)
    labels.fill_diagonal_(2)
    return {
        "sims": text @ video.T,
        "relevance": relevance,
        "labels": labels,
        "text_sims": text @ text.T,
    }


class BenchRun:
    """What a training run supplies to a loss (:class:`rudder.losses.RunFacts`), taken from
    the benchmark batch: dw's embedding dimension, hn_exclusion's caption-similarity
    threshold (here over the batch's caption pairs instead of the training set's; each
    caption is of another video, so ``other_videos`` changes nothing)."""

    embedding_dim = 256

    def __init__(self, text_sims: torch.Tensor):
        self.pairs = text_sims[~torch.eye(len(text_sims), dtype=torch.bool)]

    def caption_similarity_threshold(self, top_fraction: float,
                                     other_videos: bool = False) -> float:
        return float(torch.quantile(self.pairs, 1 - top_fraction))


def time_loss(name: str, inputs: dict, repeats: int) -> tuple[float, float]:
    """Median and minimum milliseconds of one forward + backward, the loss built with its
    defaults and what a run supplies (as the trainer builds it)."""
    loss = losses.build(name, **losses.run_params(name, {}, BenchRun(inputs["text_sims"])))
    generator = torch.Generator().manual_seed(0)
    times = []
    for step in range(repeats + 3):  # 3 warm-up runs
        sims = inputs["sims"].clone().requires_grad_(True)
        start = time.perf_counter()
        value = loss(sims, relevance=inputs["relevance"], labels=inputs["labels"],
                     text_sims=inputs["text_sims"], generator=generator)
        value.backward()
        elapsed = (time.perf_counter() - start) * 1000
        if step >= 3:
            times.append(elapsed)
    return statistics.median(times), min(times)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--batch", type=int, default=256)
    parser.add_argument("--repeats", type=int, default=30)
    parser.add_argument("--threads", type=int, default=2)
    args = parser.parse_args(argv)
    torch.set_num_threads(args.threads)
    inputs = _inputs(args.batch)
    missed = []
    print(f"{'loss':<18}{'median ms':>10}{'min ms':>8}{'target ms':>11}  ok")
    for name in losses.names():
        median, fastest = time_loss(name, inputs, args.repeats)
        target = TARGET_MS.get(name, DEFAULT_TARGET_MS)
        ok = median < target
        if not ok:
            missed.append(name)
        print(f"{name:<18}{median:>10.2f}{fastest:>8.2f}{target:>11.0f}  {'yes' if ok else 'NO'}")
    status = "FAIL" if missed else "PASS"
    print(f"bench_losses: {status} B={args.batch} threads={args.threads}"
          + (f" missed: {', '.join(missed)}" if missed else ""))
    return 1 if missed else 0


if __name__ == "__main__":
    sys.exit(main())
