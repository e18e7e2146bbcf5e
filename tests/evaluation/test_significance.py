"""rudder.evaluation.significance: bootstrap intervals and the two Wilcoxon readings, on hand
examples."""

import numpy as np
import pytest

from rudder.evaluation import metrics, significance


def test_bootstrap_ci_contains_estimate_and_shrinks_with_more_queries():
    rng = np.random.default_rng(0)
    widths = {}
    for n in (100, 10_000):
        ranks = np.floor(rng.exponential(8.0, size=n))
        for stat in ("R1", "R5", "R10", "MdR", "MnR", "geometric_mean"):
            ci = significance.bootstrap_ci(ranks, stat, n_resamples=500)
            assert ci.estimate == pytest.approx(metrics.metrics_from_ranks(ranks)[stat])
            assert ci.low <= ci.estimate <= ci.high, (n, stat, ci)
            widths[n, stat] = ci.high - ci.low
    for stat in ("R1", "R5", "R10", "MnR"):
        assert widths[10_000, stat] < widths[100, stat] / 4  # ~ 1/sqrt(n): 10x narrower expected


def test_bootstrap_ci_degenerate_seeded_and_callable():
    ci = significance.bootstrap_ci(np.full(50, 3.0), "MnR")
    assert ci == (4.0, 4.0, 4.0)  # every resample is the same sample
    v = np.random.default_rng(2).random(300)
    assert significance.bootstrap_ci(v, "mean", seed=5) == significance.bootstrap_ci(
        v, lambda x: x.mean(axis=1), seed=5
    )
    assert significance.bootstrap_ci(np.r_[v, np.nan], "mean", seed=5) == significance.bootstrap_ci(
        v, "mean", seed=5
    )
    with pytest.raises(ValueError, match="unknown statistic"):
        significance.bootstrap_ci(v, "R3")


def test_wilcoxon_known_case_and_zero_differences():
    b = np.array([0, 0, 1, 2, 5, 3, 7, 4.0])
    a = b + np.array([0, 0, 1, 2, 3, 4, 5, 6])
    # Zeros dropped ("wilcox"); the six positive differences take ranks 1..6: W- = 0. Exact
    # two-sided p = 2 * P(W- = 0) = 2 / 2**6 = 0.03125.
    res = significance.wilcoxon_ranks(a, b)
    assert res.statistic == 0.0
    assert res.pvalue == pytest.approx(0.03125)
    assert (res.n_pairs, res.n_nonzero) == (8, 6)
    # Two negative differences of size 1 and 2 tie with positive ones: |d| ranks 1.5 and 3.5,
    # W- = 1.5 + 3.5 = 5.
    d = np.array([1, 2, 3, 4, 5, 6, -1, -2.0])
    assert significance.wilcoxon_ranks(d, np.zeros(8)).statistic == pytest.approx(5.0)
    same = significance.wilcoxon_ranks(b, b)
    assert (same.statistic, same.pvalue, same.n_nonzero) == (0.0, 1.0, 0)
    with pytest.raises(ValueError, match="NaN positions differ"):
        significance.wilcoxon_ranks([1.0, np.nan], [1.0, 2.0])


def test_seed_averaged_wilcoxon_pairs_queries_not_seed_query_pairs():
    # Two seeds, six queries and a masked seventh. Averages over seeds: A [1, 2, 3, 4, 5, 1],
    # B [1, 1, 1, 1, 1, 6] -> d = [0, 1, 2, 3, 4, -5]; the zero is dropped, |d| ranks 1..5,
    # W+ = 10, W- = 5 -> statistic 5. Exact two-sided p: 10 of the 32 sign patterns give
    # W- <= 5 ({}, {1}, ..., {5}, {1,2}, {1,3}, {1,4}, {2,3}) -> p = 2 * 10/32 = 0.625.
    nan = np.nan
    a = np.array([[1, 2, 3, 4, 5, 0, nan], [1, 2, 3, 4, 5, 2, nan]])
    b = np.array([[1, 1, 1, 1, 1, 6, nan], [1, 1, 1, 1, 1, 6, nan]])
    res = significance.wilcoxon_seed_averaged(a, b)
    assert (res.n_pairs, res.n_nonzero) == (6, 5)
    assert res.statistic == 5.0
    assert res.pvalue == pytest.approx(0.625)
    pooled = significance.wilcoxon_ranks(a.reshape(-1), b.reshape(-1))  # the old reading
    assert (pooled.n_pairs, pooled.n_nonzero) == (12, 10)
    with pytest.raises(ValueError, match="same seeds and queries"):
        significance.wilcoxon_seed_averaged(a, b[:1])


def test_median_ranks_across_experiments_the_papers_reading():
    # Per experiment, MdR = median rank + 1: A [5, 4, 6, 3], B [4, 2, 3, 7] -> d = [1, 2, 3, -4],
    # ranks 1..4, W+ = 6, W- = 4 -> statistic 4. Exact two-sided p: 7 of 16 patterns give
    # W- <= 4 ({}, {1}, {2}, {3}, {4}, {1,2}, {1,3}) -> p = 2 * 7/16 = 0.875.
    a = np.array([[0, 4, 9], [3, 3, 3], [1, 5, 6], [2, 2, np.nan]])
    b = np.array([[3, 3, 3], [0, 1, 2], [2, 2, 2], [6, 6, np.nan]])
    out = significance.wilcoxon_median_ranks(a, b)
    assert out.median_ranks_a == (5.0, 4.0, 6.0, 3.0)
    assert out.median_ranks_b == (4.0, 2.0, 3.0, 7.0)
    assert out.test.statistic == 4.0 and out.test.n_pairs == 4
    assert out.test.pvalue == pytest.approx(0.875)
    # Three experiments all in A's favour: the smallest two-sided p there is, 2 / 2**3.
    best = significance.wilcoxon_median_ranks(
        np.zeros((3, 5)), np.arange(3)[:, None] + np.ones((3, 5))
    )
    assert best.test.pvalue == pytest.approx(0.25)
    assert metrics.metrics_from_ranks(a[0])["MdR"] == out.median_ranks_a[0]


def test_seed_averaged_wilcoxon_keeps_equal_differences_tied():
    # Three seeds. Rank sums: A [7, 1, 9, 15], B [4, 4, 3, 6] -> averaged differences
    # [1, -1, 2, 3], where float averages give 1.0000000000000002 and -1.0. Tied: |d| ranks
    # [1.5, 1.5, 3, 4], W- = 1.5; exact two-sided p over the 16 sign patterns: W- <= 1.5 for
    # {}, {first}, {second} -> p = 2 * 3/16 = 0.375 (untied, it would be W- = 1, p = 0.25).
    a = np.array([[1, 0, 3, 5], [2, 0, 3, 5], [4, 1, 3, 5]])
    b = np.array([[0, 1, 1, 2], [2, 2, 1, 2], [2, 1, 1, 2]])
    res = significance.wilcoxon_seed_averaged(a, b)
    assert res.statistic == 1.5 and res.pvalue == pytest.approx(0.375)


def test_median_rank_test_floor_holds_with_a_zero_difference():
    # MdR A (3, 4, 5) vs B (3, 3, 3): d = [0, 1, 2]. scipy >= 1.15 runs the exhaustive
    # permutation test with zeros (p = 0.5); the normal approximation of older scipy gave
    # 0.18, below the 2 / 2**3 floor of three experiments.
    a = np.array([[2.0] * 3, [3.0] * 3, [4.0] * 3])
    b = np.full((3, 3), 2.0)
    out = significance.wilcoxon_median_ranks(a, b)
    assert out.median_ranks_a == (3.0, 4.0, 5.0) and out.median_ranks_b == (3.0, 3.0, 3.0)
    assert out.test.pvalue == pytest.approx(0.5)


# ----------------------------------------------------------------------------- per video, Holm
def test_holm_hand_worked():
    # m = 4, sorted 0.005, 0.01, 0.03, 0.04 -> 4 * 0.005 = 0.02, 3 * 0.01 = 0.03,
    # 2 * 0.03 = 0.06, max(0.06, 1 * 0.04) = 0.06; back in input order. NaN: no test.
    np.testing.assert_allclose(
        significance.holm([0.01, 0.04, 0.03, np.nan, 0.005]), [0.03, 0.06, 0.06, np.nan, 0.02]
    )
    np.testing.assert_array_equal(significance.holm([0.5, 0.9]), [1.0, 1.0])  # capped at 1
    assert np.isnan(significance.holm([np.nan])).all()


def test_holm_against_a_direct_loop():
    rng = np.random.default_rng(2)
    for _ in range(20):
        p = rng.random(7) ** 3
        m, order = len(p), sorted(range(len(p)), key=lambda i: p[i])
        expected, running = np.empty(m), 0.0
        for j, i in enumerate(order):  # step-down: never below the previous adjusted value
            running = max(running, min(1.0, (m - j) * p[i]))
            expected[i] = running
        np.testing.assert_allclose(significance.holm(p), expected)


def _clustered(seed=0, seeds=3, videos=12, k=4):
    rng = np.random.default_rng(seed)
    a = rng.integers(0, 20, (seeds, videos * k)) / 2.0  # tie-averaged ranks: multiples of 0.5
    b = rng.integers(0, 20, (seeds, videos * k)) / 2.0
    a[:, 5] = b[:, 5] = np.nan  # a masked caption
    return a, b, np.arange(videos * k) // k


def test_per_video_wilcoxon_against_a_direct_loop():
    from scipy.stats import wilcoxon

    a, b, groups = _clustered()
    means = []
    for video in np.unique(groups):  # mean of a - b over the video's valid captions and seeds
        cells = [(s, q) for s in range(a.shape[0]) for q in np.flatnonzero(groups == video)
                 if not np.isnan(a[s, q])]
        means.append(sum(a[s, q] - b[s, q] for s, q in cells) / len(cells))
    expected = wilcoxon(np.array(means))
    got = significance.wilcoxon_per_video(a, b, groups)
    assert got.n_pairs == 12 and got.pvalue == pytest.approx(expected.pvalue)
    assert got.statistic == pytest.approx(expected.statistic)
    # one caption per video and one seed: the per-caption test
    one = significance.wilcoxon_per_video(a[:1], b[:1], np.arange(a.shape[1]))
    assert one == significance.wilcoxon_seed_averaged(a[:1], b[:1])
    with pytest.raises(ValueError, match="one per query"):
        significance.wilcoxon_per_video(a, b, groups[:-1])


def test_cluster_bootstrap_against_a_direct_loop():
    a, b, groups = _clustered(1)
    ci = significance.cluster_bootstrap_mean_difference(a, b, groups, n_resamples=200, seed=4)
    assert ci.estimate == pytest.approx(np.nanmean(a - b))
    draws = np.random.default_rng(4).integers(0, 12, size=(200, 12))  # bootstrap_ci's draws
    stats = []
    for draw in draws:  # keep every caption and seed of each drawn video
        total = count = 0.0
        for video in draw:
            d = (a - b)[:, groups == video]
            total, count = total + np.nansum(d), count + np.count_nonzero(~np.isnan(d))
        stats.append(total / count)
    low, high = np.quantile(stats, [0.025, 0.975])
    assert (ci.low, ci.high) == pytest.approx((low, high))
