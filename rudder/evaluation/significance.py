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
- across training runs and videos: the readings above condition on the trained models (a
  seed's model is fixed, only the test queries vary), so they compare a few trained models,
  not two losses. Two tests take the training run as the unit of replication, with the
  videos as a second, crossed random factor: :func:`crossed_random_effects_test`, the mean
  rank difference against its variance under a linear mixed model with random run and
  video effects (method-of-moments components, Satterthwaite degrees of freedom), and
  :func:`hierarchical_bootstrap`, a two-level bootstrap (Saravanan et al. 2020) that draws
  runs, then videos. How often each rejects between runs of one configuration (it should
  be about 5% at p < 0.05) is measured by ``python -m experiments.calibrate``.
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


class HierarchicalTest(NamedTuple):
    estimate: float  # mean over A's runs and all queries minus the same for B
    low: float  # percentile interval of the difference
    high: float
    pvalue: float  # two-sided
    runs_a: int
    runs_b: int
    clusters: int  # videos with a valid query
    n_resamples: int


HIERARCHICAL_BLOCK = 1000  # resamples drawn at once (the order of the draws is documented)


def _cluster_sums(values, groups, name: str) -> tuple[np.ndarray, np.ndarray]:
    """Per run and video: the sum of the run's values over the video's valid queries; and
    the valid queries per video (the same for every run)."""
    v = _per_seed(values, name)
    g = np.asarray(groups).reshape(-1)
    if g.size != v.shape[1]:
        raise ValueError(f"groups has {g.size} entries; expected one per query ({v.shape[1]})")
    valid = ~np.isnan(v)
    if not (valid == valid[0]).all():
        raise ValueError(f"{name}: its runs mask different queries (NaN positions differ)")
    _, video = np.unique(g[valid[0]], return_inverse=True)
    count = np.bincount(video).astype(np.float64)
    sums = np.stack([np.bincount(video, weights=run[valid[0]], minlength=count.size)
                     for run in v])
    return sums, count


def hierarchical_bootstrap(
    values_a, values_b, groups, n_resamples: int = 10_000, confidence: float = 0.95,
    seed: int = 0,
) -> HierarchicalTest:
    """Two-level bootstrap test of A - B whose unit of replication is the training run.

    ``values_a``: (runs_a, queries) per-query values (0-based ranks, or any per-query score)
    of A's training runs, each run trained on its own (its own seed); ``values_b``: (runs_b,
    queries) of B's runs. The runs of A and B are *not* paired (their counts may differ),
    the queries are: the same test queries in the same order, NaN where masked (the same
    mask in every run). ``groups``: the video of each query.

    Statistic: D = mean over A's runs and all valid queries minus the same for B (for ranks,
    the difference of mean ranks: negative = A ranks better). Each resample draws, with
    replacement, (1) runs_a of A's runs and runs_b of B's, then (2) as many videos as there
    are, the same videos for both losses with all their queries (the videos are crossed with
    the runs, every run ranks every video: resampling both factors is Owen's pigeonhole
    bootstrap, which is mildly conservative), and computes D* = sum over the drawn videos of
    (A's mean over its drawn runs - B's) of the video's query sums, divided by the drawn
    videos' query count (its sign taken from the exact numerator, so that a resample equal
    to 0 counts in both tails). The highest level first, then the level below: the hierarchical
    bootstrap of Saravanan, Berman & Sober, "Application of the hierarchical bootstrap to
    multi-level data in neuroscience", Neurons, Behavior, Data analysis, and Theory 2020;
    crossed factors: Owen, "The pigeonhole bootstrap", Annals of Applied Statistics 2007.

    ``low``/``high``: the (1 - confidence)/2 and (1 + confidence)/2 quantiles of D* (linear
    interpolation). ``pvalue``: two-sided, 2 (1 + min(#{D* <= 0}, #{D* >= 0})) / (B + 1),
    at most 1 (the percentile test: 0 outside the central interval of D*, with the +1 of
    Davison & Hinkley 1997, eq. 4.11, so it is never 0). Draws: numpy
    ``default_rng(seed)``; per block of up to :data:`HIERARCHICAL_BLOCK` resamples, the run
    indices of A (b, runs_a), then of B (b, runs_b), then the video indices (b, videos).
    Its false-positive rate between runs of one configuration is measured by
    ``python -m experiments.calibrate`` (experiments/README.md).
    """
    sums_a, count = _cluster_sums(values_a, groups, "values_a")
    sums_b, count_b = _cluster_sums(values_b, groups, "values_b")
    if sums_a.shape[1] != sums_b.shape[1] or not np.array_equal(count, count_b):
        raise ValueError("values_a and values_b mask different queries (NaN positions differ)")
    if not 0 < confidence < 1:
        raise ValueError(f"confidence must be in (0, 1), got {confidence}")
    if n_resamples < 1:
        raise ValueError(f"n_resamples must be positive, got {n_resamples}")
    runs_a, runs_b, videos = sums_a.shape[0], sums_b.shape[0], count.size
    estimate = float(sums_a.sum(1).mean() / count.sum() - sums_b.sum(1).mean() / count.sum())
    rng = np.random.default_rng(seed)
    boot, signs = [], []
    for start in range(0, n_resamples, HIERARCHICAL_BLOCK):
        b = min(HIERARCHICAL_BLOCK, n_resamples - start)
        pick_a = rng.integers(0, runs_a, size=(b, runs_a))
        pick_b = rng.integers(0, runs_b, size=(b, runs_b))
        pick_v = rng.integers(0, videos, size=(b, videos))
        # runs_b * (sum over A's drawn runs) - runs_a * (B's): exact for ranks (multiples of
        # 0.5), so a difference of exactly 0 is 0 and counts in both tails
        total = sums_a[pick_a].sum(axis=1) * runs_b - sums_b[pick_b].sum(axis=1) * runs_a
        numerator = total[np.arange(b)[:, None], pick_v].sum(axis=1)
        signs.append(np.sign(numerator))
        boot.append(numerator / (runs_a * runs_b * count[pick_v].sum(axis=1)))
    dist, sign = np.concatenate(boot), np.concatenate(signs)
    low, high = np.quantile(dist, [(1 - confidence) / 2, (1 + confidence) / 2])
    tail = min(np.count_nonzero(sign <= 0), np.count_nonzero(sign >= 0))
    pvalue = min(1.0, 2 * (1 + tail) / (n_resamples + 1))
    return HierarchicalTest(estimate, float(low), float(high), float(pvalue), runs_a, runs_b,
                            videos, n_resamples)


class CrossedTest(NamedTuple):
    estimate: float  # mean over A's runs and all queries minus the same for B
    low: float  # estimate -/+ t quantile x standard error
    high: float
    pvalue: float  # two-sided, Student t with ``df`` degrees of freedom
    se: float
    df: float
    runs_a: int
    runs_b: int
    clusters: int
    run_variance_a: float  # the components of se**2 (see crossed_random_effects_test)
    run_variance_b: float
    video_variance: float
    residual_variance: float


def crossed_random_effects_test(values_a, values_b, groups, confidence: float = 0.95
                                ) -> CrossedTest:
    """Test of A - B whose units of replication are the training run and the video.

    Arguments as :func:`hierarchical_bootstrap` (runs of A and B not paired, at least two of
    each; queries paired; ``groups`` the video of each query). Statistic: D = mean over A's
    runs and all valid queries minus the same for B (negative: A ranks better).

    Model (a linear mixed model with crossed random effects, as for subjects and items in
    Clark, "The language-as-fixed-effect fallacy", JVLVB 1973, and Baayen, Davidson & Bates,
    JML 2008): for loss a, run r and video v with c_v valid queries, the sum of the run's
    values over the video's queries is y_arv = c_v mu_a + u_v + g_av + c_v b_ar + e_arv,
    with u_v the video's difficulty (shared, it cancels), g_av a loss x video interaction,
    b_ar the run's effect (its seed) and e_arv the run x video residual, all random and
    independent. With C = sum_v c_v, D = sum_v (mean_r y_Arv - mean_r y_Brv) / C and

        Var(D) = Var(mean b_A) + Var(mean b_B)
                 + sum_v Var(g_Av - g_Bv + mean e_Av - mean e_Bv) / C².

    Its method-of-moments estimate (the ANOVA estimators, which REML equals in a balanced
    design where they are positive; Searle, Casella & McCulloch, "Variance Components",
    1992, ch. 4) from three mean squares: the runs' totals T_ar = sum_v y_arv / C,
    ``run_variance_a`` = s²(T_Ar) / n_A (ddof 1; likewise B), which holds the run effect and
    the residual; the videos' differences d_v = mean_r y_Arv - mean_r y_Brv,
    ``video_variance`` = V / (V - 1) sum_v (d_v - c_v D)² / C², which holds the
    interaction and the residual again; and the residual itself, ``residual_variance`` =
    sum_v sum_a s²_av / n_a / C² with s²_av = sum_r (y_arv - mean_r y_arv - c_v (T_ar -
    mean_r T_ar))² / (n_a - 1), counted once:
    se² = run_variance_a + run_variance_b + max(0, video_variance - residual_variance).
    (Resampling runs and videos both, as :func:`hierarchical_bootstrap`, counts the
    residual twice and is conservative: Owen 2007.) Degrees of freedom: Satterthwaite
    (Biometrics Bulletin 1946), se⁴ / (run_variance_a² / (n_A - 1) + run_variance_b² /
    (n_B - 1) + video_part² / (V - 1)). p = 2 P(T_df > |D| / se); the interval is D ∓
    t_df((1 + confidence) / 2) se. With se = 0 (identical runs), p is 1 for D = 0 and 0
    otherwise.
    """
    sums_a, count = _cluster_sums(values_a, groups, "values_a")
    sums_b, count_b = _cluster_sums(values_b, groups, "values_b")
    if sums_a.shape[1] != sums_b.shape[1] or not np.array_equal(count, count_b):
        raise ValueError("values_a and values_b mask different queries (NaN positions differ)")
    if min(len(sums_a), len(sums_b)) < 2:
        raise ValueError("crossed_random_effects_test needs at least two runs of each loss, "
                         f"got {len(sums_a)} and {len(sums_b)}")
    if not 0 < confidence < 1:
        raise ValueError(f"confidence must be in (0, 1), got {confidence}")
    from scipy.stats import t as student

    total, videos = count.sum(), count.size
    parts = {}
    for name, sums in (("a", sums_a), ("b", sums_b)):
        runs = sums.sum(axis=1) / total
        residual = sums - sums.mean(axis=0) - np.outer(runs - runs.mean(), count)
        parts[name] = (runs.var(ddof=1) / len(sums),
                       (residual**2).sum(axis=0) / (len(sums) - 1) / len(sums))
    estimate = float(sums_a.sum(1).mean() / total - sums_b.sum(1).mean() / total)
    d = sums_a.mean(axis=0) - sums_b.mean(axis=0)
    video = float(videos / (videos - 1) * ((d - count * estimate) ** 2).sum() / total**2)
    residual = float((parts["a"][1] + parts["b"][1]).sum() / total**2)
    run_a, run_b = float(parts["a"][0]), float(parts["b"][0])
    video_part = max(0.0, video - residual)
    var = run_a + run_b + video_part
    se = float(np.sqrt(var))
    if var == 0:
        p, df, half = (1.0 if estimate == 0 else 0.0), float("inf"), 0.0
    else:
        df = float(var**2 / (run_a**2 / (len(sums_a) - 1) + run_b**2 / (len(sums_b) - 1)
                             + video_part**2 / (videos - 1)))
        p = float(2 * student.sf(abs(estimate) / se, df))
        half = float(student.ppf((1 + confidence) / 2, df) * se)
    return CrossedTest(estimate, estimate - half, estimate + half, min(1.0, p), se, df,
                       len(sums_a), len(sums_b), videos, run_a, run_b, video, residual)


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
