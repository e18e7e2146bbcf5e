"""Plots of a suite (matplotlib, Agg backend): R@K curves per row, and the relevance of the
hardest in-batch negatives per loss (as Falcon et al. 2022, Fig. 2).

Hardest-negative relevance: the test split is cut into training-style batches
(:func:`rudder.data.batching.epoch_batches`: each video at most once, one valid caption per
video drawn uniformly, ``batch_size`` of the run); for each caption anchor ``i`` of a batch,
its hardest negative is the other batch video ``j`` with the largest similarity
``sims[i, j]`` (caption->video, as the max-violation miners of the losses see it), and we
record ``relevance[i, j]`` (docs/architecture.md's R). ``draws`` independent batchings are pooled.
A model whose hardest negatives have high relevance confuses semantically close videos
(partially relevant ones); low relevance means its errors are unrelated videos. The grey
outline is the same batching with a uniformly random negative instead (model-free baseline).
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import numpy as np
import torch

from rudder.data.batching import epoch_batches
from rudder.evaluation import metrics

from .collect import RowResult


def hardest_negative_relevance(
    sims,
    relevance,
    query_masks,
    batch_size: int,
    draws: int = 10,
    seed: int = 0,
    random_negative: bool = False,
) -> np.ndarray:
    """Relevance of each caption anchor's hardest (or a random) in-batch negative video.

    ``sims``, ``relevance``: ``(V*K, V)`` video-major (docs/architecture.md);
    ``query_masks``: ``(V, K)``.
    Returns one value per anchor per draw (pooled). Batches: ``epoch_batches(..., "random")``
    with a ``torch.Generator`` seeded ``seed``. Equal similarities: the lowest video index
    wins (numpy ``argmax`` over the batch's videos in index order).
    """
    sims = np.asarray(sims, dtype=np.float64)
    relevance = np.asarray(relevance, dtype=np.float64)
    masks = torch.as_tensor(np.asarray(query_masks, dtype=bool))
    k = masks.shape[1]
    generator = torch.Generator().manual_seed(seed)
    rng = np.random.default_rng(seed)
    out = []
    for _ in range(draws):
        for videos, slots in epoch_batches(masks, batch_size, generator, "random"):
            order = videos.argsort()  # columns in video order, so ties go to the lowest index
            v, rows = videos[order].numpy(), (videos * k + slots)[order].numpy()
            if random_negative:
                pick = (np.arange(len(v)) + rng.integers(1, len(v), size=len(v))) % len(v)
            else:
                block = sims[np.ix_(rows, v)]
                np.fill_diagonal(block, -np.inf)
                pick = block.argmax(axis=1)
            out.append(relevance[rows, v[pick]])
    return np.concatenate(out) if out else np.empty(0)


def recall_curve(ranks: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """``(K, R@K)`` for K = 1..max rank + 1 of ``(seeds, queries)`` ranks (NaN = masked query),
    mean over seeds. Each point is :func:`rudder.evaluation.metrics.recall_at`, the tables' rule:
    R@1
    counts an untied first place only (rank == 0), R@K for K > 1 counts rank < K."""
    ranks = ranks[:, ~np.isnan(ranks[0])]
    ks = np.arange(1, int(np.max(ranks)) + 2)
    return ks, np.stack([metrics.recall_at(ranks, int(k)) for k in ks], axis=-1).mean(axis=0)


def recall_curves(rows: Sequence[RowResult], path: Path, title: str = "") -> Path:
    """R@K curves (:func:`recall_curve`) per row, both directions; log-K axis."""
    plt = _pyplot()
    fig, axes = plt.subplots(1, 2, figsize=(10, 4), sharey=True)
    names = ("text → video", "video → text")
    for ax, direction, name in zip(axes, ("t2v", "v2t"), names, strict=True):
        for i, row in enumerate(rows):
            ks, curve = recall_curve(row.ranks[direction])
            style = ("-", "--", ":")[(i // 10) % 3]  # ten colours, then the next line style
            ax.plot(ks, curve, label=row.label, linewidth=1.2, color=f"C{i % 10}", linestyle=style)
        ax.set_xscale("log")
        ax.set_xlabel("K")
        ax.set_title(name)
        ax.grid(alpha=0.3)
    axes[0].set_ylabel("R@K (%), mean over seeds")
    axes[1].legend(fontsize=7, loc="lower right")
    if title:
        fig.suptitle(title, fontsize=9)
    return _save(fig, path)


def hard_negative_histograms(
    values: dict[str, np.ndarray], baseline: np.ndarray, path: Path, title: str = ""
) -> Path:
    """One histogram per loss of hardest-negative relevance; the random baseline outlined."""
    plt = _pyplot()
    n = len(values)
    cols = min(4, n)
    nrows = -(-n // cols)
    fig, axes = plt.subplots(
        nrows, cols, figsize=(3 * cols, 2.4 * nrows), sharex=True, sharey=True, squeeze=False
    )
    bins = np.linspace(0, 1, 21)
    for ax, (label, v) in zip(axes.flat, values.items(), strict=False):
        ax.hist(v, bins=bins, weights=_percent(v), color="tab:blue", alpha=0.8)
        ax.hist(baseline, bins=bins, weights=_percent(baseline), histtype="step", color="grey")
        ax.set_title(f"{label}\nmean R {v.mean():.2f}, R>0 {100 * (v > 0).mean():.0f}%", fontsize=8)
    for ax in axes.flat[n:]:
        ax.axis("off")
    for ax in axes[-1]:
        ax.set_xlabel("relevance of hardest negative")
    for ax in axes[:, 0]:
        ax.set_ylabel("% of anchors")
    base = (
        (
            f"grey: a random in-batch negative, mean R {baseline.mean():.2f}, R>0 "
            f"{100 * (baseline > 0).mean():.0f}%"
        )
        if len(baseline)
        else "no baseline"
    )
    fig.suptitle(f"{title or 'Relevance of the hardest in-batch negative'} ({base})", fontsize=9)
    return _save(fig, path)


def _percent(values: np.ndarray) -> np.ndarray:
    """Histogram weights that make the bars percentages of the values."""
    return np.full(len(values), 100.0 / max(len(values), 1))


def _pyplot():
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def _save(fig, path: Path) -> Path:
    """Save as PNG through a temporary file and a rename (atomic)."""
    from rudder.atomic import replacing

    fig.tight_layout()
    with replacing(path) as tmp:
        fig.savefig(tmp, format="png", dpi=90)
    _pyplot().close(fig)
    return Path(path)
