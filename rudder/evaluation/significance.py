"""Significance of retrieval results: bootstrap intervals, Wilcoxon tests, Holm's correction.

Readings of "A ranks better than B" over several seeds, named in every output:
- per caption (:func:`wilcoxon_seed_averaged`): each test query's rank averaged over the
  seeds, then the signed-rank test over queries. Pooling seed x query pairs instead would
  treat the seeds' ranks of one query as independent samples, which they are not.
- per video (:func:`wilcoxon_per_video`): the captions of one video are not independent
  either (911 test captions come from 160 videos on the sample), so each video's rank
  difference is averaged over its captions and the seeds, then the test runs over videos;
  :func:`cluster_bootstrap_mean_difference` gives an interval of the mean-rank difference
  that resamples whole videos. For video-to-text the queries are videos: the per-caption
  and per-video tests are the same test.
- across experiments (:func:`wilcoxon_median_ranks`): one median rank (MdR) per experiment
  (seed) and method, then the signed-rank test over experiments. With n experiments the
  smallest two-sided p-value is 2 / 2**n (0.25 for 3 seeds). (The RUDDER paper pooled
  median-rank pairs over all its experiments, not the seeds of one comparison.)
- :func:`holm` adjusts the p-values of a table's comparisons for multiplicity.
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np

from rudder.evaluation.metrics import rank_statistic

_RESAMPLE_BLOCK = 1 << 22  # resampled values drawn at once (32 MB of float64)


class ConfidenceInterval(NamedTuple):
    estimate: float
    low: float
    high: float


def bootstrap_ci(
    values, statistic, n_resamples: int = 1000, confidence: float = 0.95, seed: int = 0
) -> ConfidenceInterval:
    """Percentile bootstrap interval over queries (Efron & Tibshirani 1993, ch. 13).

    ``values``: per-query ranks (:func:`rudder.evaluation.metrics.query_ranks`) or per-query scores
    (e.g. ``ndcg(..., reduction="none")``); NaN entries (masked queries) are dropped.
    ``statistic``: one of R1, R5, R10, R50, MdR, MnR, geometric_mean (on 0-based ranks, with
    :func:`rudder.evaluation.metrics.metrics_from_ranks`' definitions), "mean", or a callable
    mapping an
    (B, n) array of resamples to (B,) values. Queries are resampled with replacement
    ``n_resamples`` times (all resamples drawn at once per block, numpy ``default_rng(seed)``);
    the interval is the (1 - confidence)/2 and (1 + confidence)/2 quantiles (linear
    interpolation) of the resampled statistic; ``estimate`` is the statistic on the full sample.
    """
    v = np.asarray(values, dtype=np.float64).reshape(-1)
    v = v[~np.isnan(v)]
    if v.size == 0:
        raise ValueError("bootstrap_ci needs at least one non-NaN value")
    if not 0 < confidence < 1:
        raise ValueError(f"confidence must be in (0, 1), got {confidence}")
    if n_resamples < 1:
        raise ValueError(f"n_resamples must be positive, got {n_resamples}")
    stat = statistic if callable(statistic) else rank_statistic(statistic)
    rng = np.random.default_rng(seed)
    step = max(1, _RESAMPLE_BLOCK // v.size)
    boot = np.concatenate(
        [
            np.asarray(
                stat(v[rng.integers(0, v.size, size=(min(step, n_resamples - i), v.size))]),
                dtype=np.float64,
            ).reshape(-1)
            for i in range(0, n_resamples, step)
        ]
    )
    low, high = np.quantile(boot, [(1 - confidence) / 2, (1 + confidence) / 2])
    return ConfidenceInterval(
        float(np.asarray(stat(v[None, :])).reshape(-1)[0]), float(low), float(high)
    )


class WilcoxonResult(NamedTuple):
    statistic: float
    pvalue: float
    n_pairs: int
    n_nonzero: int


def wilcoxon_ranks(
    ranks_a, ranks_b, zero_method: str = "wilcox", alternative: str = "two-sided"
) -> WilcoxonResult:
    """Wilcoxon signed-rank test between paired values of two runs (``scipy.stats.wilcoxon``).

    Per-query ranks, or any paired values (the functions below). The runs must rank the same
    queries: NaN (masked) positions must coincide and are dropped.
    Zero differences (both runs rank the query equally, common at rank 0): by default
    ``zero_method="wilcox"`` discards them before ranking (Wilcoxon 1945); "pratt" ranks them
    and then drops them, "zsplit" splits their rank sums between the signs. When every
    difference is zero the test is undefined and the result is statistic 0, p-value 1.
    scipy's ``method="auto"`` (scipy >= 1.15) takes the exact null distribution for up to 50
    pairs without ties or zeros, an exhaustive permutation test for up to 13 pairs with ties
    or zeros, and the normal approximation otherwise. ``statistic`` is scipy's (for
    two-sided, the smaller signed-rank sum).
    """
    a = np.asarray(ranks_a, dtype=np.float64).reshape(-1)
    b = np.asarray(ranks_b, dtype=np.float64).reshape(-1)
    if a.shape != b.shape:
        raise ValueError(
            f"ranks_a has {a.size} queries and ranks_b {b.size}; they must be the same queries"
        )
    if not np.array_equal(np.isnan(a), np.isnan(b)):
        raise ValueError("ranks_a and ranks_b mask different queries (NaN positions differ)")
    keep = ~np.isnan(a)
    d = a[keep] - b[keep]
    nonzero = int(np.count_nonzero(d))
    if nonzero == 0:
        return WilcoxonResult(0.0, 1.0, int(d.size), 0)
    from scipy.stats import wilcoxon

    res = wilcoxon(d, zero_method=zero_method, alternative=alternative)
    return WilcoxonResult(float(res.statistic), float(res.pvalue), int(d.size), nonzero)


def _per_seed(ranks, name: str) -> np.ndarray:
    r = np.asarray(ranks, dtype=np.float64)
    if r.ndim != 2:
        raise ValueError(f"{name} must be (seeds, queries) ranks, got shape {r.shape}")
    return r


def wilcoxon_seed_averaged(ranks_a, ranks_b) -> WilcoxonResult:
    """Wilcoxon signed-rank test over queries on the ranks averaged over seeds.

    ``ranks_a``, ``ranks_b``: (seeds, queries) 0-based ranks of two methods, row s of both from
    the same seed, NaN for masked queries. Each query's rank is averaged over the seeds, then
    :func:`wilcoxon_ranks` pairs the two methods' averages query by query (``n_pairs`` =
    queries). The test runs on the sums over seeds (the averages times the number of seeds:
    the same signed ranks), which are exact: rounding the averages could tell apart
    differences that are equal, splitting their tied rank (the warning in scipy's
    ``wilcoxon`` docs).
    """
    a, b = _per_seed(ranks_a, "ranks_a"), _per_seed(ranks_b, "ranks_b")
    if a.shape != b.shape:
        raise ValueError(
            f"ranks_a has shape {a.shape} and ranks_b {b.shape}; give both the same seeds and "
            "queries"
        )
    return wilcoxon_ranks(a.sum(axis=0), b.sum(axis=0))


class MedianRankTest(NamedTuple):
    median_ranks_a: tuple[float, ...]
    median_ranks_b: tuple[float, ...]
    test: WilcoxonResult


def wilcoxon_median_ranks(ranks_a, ranks_b) -> MedianRankTest:
    """Wilcoxon signed-rank test over experiments (seeds) on median ranks.

    ``ranks_a``, ``ranks_b``: (experiments, queries) 0-based ranks, row e of both from the same
    experiment (seed). Each experiment's MdR (median rank + 1 over its valid queries, as
    :func:`rudder.evaluation.metrics.metrics_from_ranks`) is computed per method, then
    :func:`wilcoxon_ranks` pairs the methods experiment by experiment (``n_pairs`` =
    experiments).
    """
    a, b = _per_seed(ranks_a, "ranks_a"), _per_seed(ranks_b, "ranks_b")
    if len(a) != len(b):
        raise ValueError(
            f"ranks_a has {len(a)} experiments and ranks_b {len(b)}; pair the same ones")
    mdr = rank_statistic("MdR")
    med_a = tuple(float(mdr(r[~np.isnan(r)])) for r in a)
    med_b = tuple(float(mdr(r[~np.isnan(r)])) for r in b)
    return MedianRankTest(med_a, med_b, wilcoxon_ranks(med_a, med_b))


def _video_differences(ranks_a, ranks_b, groups) -> tuple[np.ndarray, np.ndarray]:
    """Per video: (sum over its valid captions and the seeds of rank_a - rank_b, count)."""
    a, b = _per_seed(ranks_a, "ranks_a"), _per_seed(ranks_b, "ranks_b")
    if a.shape != b.shape:
        raise ValueError(f"ranks_a has shape {a.shape} and ranks_b {b.shape}; pair the same "
                         "seeds and queries")
    if not np.array_equal(np.isnan(a), np.isnan(b)):
        raise ValueError("ranks_a and ranks_b mask different queries (NaN positions differ)")
    g = np.asarray(groups).reshape(-1)
    if g.size != a.shape[1]:
        raise ValueError(f"groups has {g.size} entries; expected one per query ({a.shape[1]})")
    keep = ~np.isnan(a)
    _, video = np.unique(np.broadcast_to(g, a.shape)[keep], return_inverse=True)
    diff = np.bincount(video, weights=(a - b)[keep])  # exact: ranks are multiples of 0.5
    count = np.bincount(video).astype(np.float64)
    return diff, count


def wilcoxon_per_video(ranks_a, ranks_b, groups) -> WilcoxonResult:
    """Wilcoxon signed-rank test over videos of the mean rank difference per video.

    ``ranks_a``, ``ranks_b``: (seeds, queries) 0-based ranks of two methods (row s of both
    from the same seed; NaN for masked queries); ``groups``: the video of each query. Each
    video's difference is the mean of rank_a - rank_b over its valid captions and the seeds
    (the per-cluster mean, the usual remedy for clustered data before a signed-rank test:
    Rosner, Glynn & Lee, "The Wilcoxon signed rank test for paired comparisons of
    clustered data", Biometrics 2006, who also give a weighted variant), then
    :func:`wilcoxon_ranks` tests the per-video means against zero (``n_pairs`` = videos). A
    mean is the exact sum divided by the count, so equal means are equal floats.
    """
    diff, count = _video_differences(ranks_a, ranks_b, groups)
    return wilcoxon_ranks(diff / count, np.zeros_like(diff))


def cluster_bootstrap_mean_difference(
    ranks_a, ranks_b, groups, n_resamples: int = 1000, confidence: float = 0.95, seed: int = 0
) -> ConfidenceInterval:
    """Percentile interval of the mean rank difference (A - B) that resamples whole videos.

    The cluster (case) bootstrap (Davison & Hinkley 1997, Sec. 3.8; Field & Welsh, JRSS-B
    2007): draw videos with replacement, keep all their captions and seeds, and take
    sum(differences) / sum(counts) over the drawn videos; ``estimate`` is the mean
    difference over all captions and seeds (negative: A ranks better). Arguments as
    :func:`wilcoxon_per_video`; numpy ``default_rng(seed)``.
    """
    diff, count = _video_differences(ranks_a, ranks_b, groups)

    def statistic(index: np.ndarray) -> np.ndarray:  # (B, videos) resampled video indices
        idx = index.astype(np.intp)
        return diff[idx].sum(axis=-1) / count[idx].sum(axis=-1)

    return bootstrap_ci(
        np.arange(diff.size, dtype=float), statistic, n_resamples, confidence, seed
    )


def holm(pvalues) -> np.ndarray:
    """Holm's step-down adjusted p-values (Holm, Scand. J. Statist. 1979).

    With the m p-values sorted ascending, p_(1) <= ... <= p_(m), the adjusted value of p_(i)
    is max over j <= i of min(1, (m - j + 1) p_(j)); reject at level alpha where it is
    <= alpha (controls the family-wise error rate). NaN entries (no test) are left out of m
    and stay NaN. Returned in the input order.
    """
    p = np.asarray(pvalues, dtype=np.float64).reshape(-1)
    out = np.full(p.shape, np.nan)
    valid = np.flatnonzero(~np.isnan(p))
    m = valid.size
    if m == 0:
        return out
    order = valid[np.argsort(p[valid], kind="stable")]
    scaled = np.minimum(1.0, (m - np.arange(m)) * p[order])
    out[order] = np.maximum.accumulate(scaled)
    return out
