"""rudder.evaluation.metrics on hand-worked cases (arithmetic in the comments) and loop
references."""

import math

import numpy as np
import pytest
import torch

from rudder.evaluation import metrics
from rudder.languages import UnsupportedLanguageError

LOG2_3 = math.log2(3)

# Three videos, K = 2 captions each, video-major rows; the last caption of video 2 is missing.
HAND_SIMS = np.array(
    [
        [0.9, 0.1, 0.2],  # v0 c0: gt 0.9, nothing greater -> rank 0
        [0.3, 0.5, 0.3],  # v0 c1: gt 0.3, one greater, two equal -> 1 + (2 - 1)/2 = 1.5
        [0.4, 0.4, 0.4],  # v1 c0: gt 0.4, three equal -> (3 - 1)/2 = 1
        [0.8, 0.45, 0.1],  # v1 c1: gt 0.45, one greater (0.8) -> 1
        [0.6, 0.2, 0.1],  # v2 c0: gt 0.1, two greater -> 2
        [0.0, 0.0, 0.99],  # v2 c1: masked (would be rank 0 and spoil v2t column 2)
    ],
    dtype=np.float32,
)
HAND_MASKS = np.array([[1, 1], [1, 1], [1, 0]])


def loop_t2v(sims, masks):
    """Reference: one query at a time, straight from the definition."""
    k = sims.shape[0] // sims.shape[1]
    valid = np.ones(len(sims), bool) if masks is None else masks.reshape(-1).astype(bool)
    out = []
    for r in np.flatnonzero(valid):
        row, gt = sims[r], sims[r, r // k]
        out.append((row > gt).sum() + ((row == gt).sum() - 1) / 2)
    return np.array(out)


def loop_v2t(sims, masks):
    k = sims.shape[0] // sims.shape[1]
    valid = np.ones(len(sims), bool) if masks is None else masks.reshape(-1).astype(bool)
    out = []
    for v in range(sims.shape[1]):
        col = sims[valid, v]
        caps = [c for c in range(v * k, (v + 1) * k) if valid[c]]
        if caps:
            out.append(
                min((col > sims[c, v]).sum() + ((col == sims[c, v]).sum() - 1) / 2 for c in caps)
            )
    return np.array(out)


def test_constant_matrix_gives_no_free_recall_at_1():
    # 10 videos, all scores equal: every rank is (10 - 1) / 2 = 4.5 in both directions.
    sims = np.full((10, 10), 0.5)
    for direction in ("t2v", "v2t"):
        np.testing.assert_array_equal(
            metrics.query_ranks(sims, direction=direction), np.full(10, 4.5)
        )
        m = metrics.retrieval_metrics(sims, direction=direction)
        assert m["R1"] == 0.0
        assert m["R5"] == m["R10"] == m["R50"] == 100.0  # 4.5 < 5
        assert m["MdR"] == m["MnR"] == 5.5
        assert m["geometric_mean"] == 0.0  # R1 is 0


def test_t2v_hand_worked_with_ties_masks_and_two_captions_per_video():
    ranks = metrics.query_ranks(HAND_SIMS, HAND_MASKS, "t2v")
    np.testing.assert_array_equal(ranks, [0, 1.5, 1, 1, 2, np.nan])
    m = metrics.retrieval_metrics(HAND_SIMS, HAND_MASKS, "t2v")
    # ranks [0, 1.5, 1, 1, 2]: R1 = 1/5; all < 5; median 1 -> MdR 2; mean 5.5/5 = 1.1 -> MnR 2.1
    assert m["R1"] == pytest.approx(20.0)
    assert m["R5"] == m["R10"] == m["R50"] == 100.0
    assert m["MdR"] == pytest.approx(2.0)
    assert m["MnR"] == pytest.approx(2.1)
    assert m["geometric_mean"] == pytest.approx((20 * 100 * 100) ** (1 / 3))


def test_v2t_takes_the_best_caption_among_valid_captions():
    # Column 0 over valid captions [0.9, 0.3, 0.4, 0.8, 0.6]: v0's captions rank 0 and 4 -> min 0.
    # Column 1 [0.1, 0.5, 0.4, 0.45, 0.2]: v1's 0.4 ranks 2, its 0.45 ranks 1 -> min 1.
    # Column 2 [0.2, 0.3, 0.4, 0.1, 0.1] (masked 0.99 left out): v2's 0.1 has 3 greater and
    # one tie -> 3 + (2 - 1)/2 = 3.5.
    ranks = metrics.query_ranks(HAND_SIMS, HAND_MASKS, "v2t")
    np.testing.assert_array_equal(ranks, [0, 1, 3.5])
    m = metrics.retrieval_metrics(HAND_SIMS, HAND_MASKS, "v2t")
    assert m["R1"] == pytest.approx(100 / 3)
    assert m["MdR"] == pytest.approx(2.0)
    assert m["MnR"] == pytest.approx(1.5 + 1)
    # Without the mask the 0.99 caption is a query and a gallery item: v2 ranks 0.
    assert metrics.query_ranks(HAND_SIMS, None, "v2t")[2] == 0


def test_video_without_valid_captions_is_not_a_v2t_query():
    masks = HAND_MASKS.copy()
    masks[2] = 0
    ranks = metrics.query_ranks(HAND_SIMS, masks, "v2t")
    assert np.isnan(ranks[2]) and not np.isnan(ranks[:2]).any()
    # ...but stays a t2v gallery item: row 1 still sees column 2's 0.3 as a tie.
    assert metrics.query_ranks(HAND_SIMS, masks, "t2v")[1] == 1.5


@pytest.mark.parametrize("k", [1, 3])
@pytest.mark.parametrize("masked", [False, True])
def test_ranks_match_loop_reference_on_tied_matrices(k, masked, monkeypatch):
    rng = np.random.default_rng(k + 10 * masked)
    n = 23
    sims = rng.integers(0, 4, size=(n * k, n)).astype(np.float32)  # many ties
    masks = (rng.random((n, k)) > 0.3).astype(int) if masked else None
    if masked:
        masks[4] = 0
    expected = {"t2v": loop_t2v(sims, masks), "v2t": loop_v2t(sims, masks)}
    for block in (metrics._BLOCK, 7):  # the default single block, and many small blocks
        monkeypatch.setattr(metrics, "_BLOCK", block)
        for direction in ("t2v", "v2t"):
            got = metrics.query_ranks(sims, masks, direction)
            np.testing.assert_array_equal(got[~np.isnan(got)], expected[direction])


# Duplicate captions: captions 0 and 1 have the same text, so the same similarity row.
DUPLICATE_SIMS = np.array(
    [
        [0.9, 0.2, 0.1],  # video 0's caption
        [0.9, 0.2, 0.1],  # video 1's caption, the same text as video 0's
        [0.3, 0.4, 0.8],  # video 2's caption
    ],
    dtype=np.float32,
)


def test_duplicate_captions_share_first_place_and_are_no_recall_at_1():
    # t2v: row 0 gt 0.9 -> 0; row 1 gt 0.2, one greater (0.9) -> 1; row 2 gt 0.8 -> 0.
    np.testing.assert_array_equal(metrics.query_ranks(DUPLICATE_SIMS, direction="t2v"), [0, 1, 0])
    # v2t: column 0 [0.9, 0.9, 0.3]: video 0's 0.9 ties with the duplicate -> (0 + 1)/2 = 0.5;
    # column 1 [0.2, 0.2, 0.4]: one greater, one tie -> 1.5; column 2 [0.1, 0.1, 0.8] -> 0.
    np.testing.assert_array_equal(
        metrics.query_ranks(DUPLICATE_SIMS, direction="v2t"), [0.5, 1.5, 0]
    )
    m = metrics.retrieval_metrics(DUPLICATE_SIMS, direction="v2t")
    # A shared first place (rank 0.5) is no R@1 hit (CE's cols2metrics counts rank == 0):
    # R1 = 1/3, not 2/3; R5 = 100; MdR = 0.5 + 1; MnR = 2/3 + 1.
    assert m["R1"] == pytest.approx(100 / 3)
    assert m["R5"] == 100.0
    assert m["MdR"] == 1.5 and m["MnR"] == pytest.approx(5 / 3)
    assert m["geometric_mean"] == pytest.approx((100 / 3 * 100 * 100) ** (1 / 3))


def loop_cols2metrics(ranks):
    """Collaborative Experts' ``cols2metrics`` as a plain loop over 0-based ranks."""
    counts = {"R1": 0, "R5": 0, "R10": 0, "R50": 0}
    for r in ranks:
        counts["R1"] += r == 0
        for k in (5, 10, 50):
            counts[f"R{k}"] += r < k
    out = {name: 100 * count / len(ranks) for name, count in counts.items()}
    ordered = sorted(ranks)
    middle = len(ordered) // 2
    median = ordered[middle] if len(ordered) % 2 else (ordered[middle - 1] + ordered[middle]) / 2
    out["MdR"], out["MnR"] = median + 1, sum(ranks) / len(ranks) + 1
    product = out["R1"] * out["R5"] * out["R10"]
    out["geometric_mean"] = product ** (1 / 3)
    return out


@pytest.mark.parametrize("seed", range(3))
def test_metrics_from_ranks_match_a_loop_over_cols2metrics(seed):
    ranks = np.random.default_rng(seed).integers(0, 120, 301) / 2  # tie-averaged: halves too
    ranks[:7] = [0, 0.5, 0.5, 1, 4.5, 9.5, 49.5]  # the boundaries of every cut
    got, expected = metrics.metrics_from_ranks(ranks), loop_cols2metrics(list(ranks))
    assert got == pytest.approx(expected, rel=1e-12)
    for k in (1, 5, 10, 50):  # the percentages are CE's floats exactly (outputs equal)
        assert got[f"R{k}"] == expected[f"R{k}"]


def test_nan_is_found_by_the_row_sums_and_infinities_are_not_nan():
    sims = np.eye(4, dtype=np.float32)
    sims[2, 3] = np.inf
    sims[3, 0] = -np.inf
    sims[3, 1] = np.inf  # inf + -inf sums to NaN: the row is searched, and holds no NaN
    assert metrics.query_ranks(sims, direction="t2v")[2] == 1  # the inf outranks the 1
    for direction in ("t2v", "v2t"):
        metrics.retrieval_metrics(sims, direction=direction)
    sims[1, 2] = np.nan
    for direction in ("t2v", "v2t"):
        with pytest.raises(ValueError, match="NaN at row 1, column 2"):
            metrics.retrieval_metrics(sims, direction=direction)


def test_torch_input_equals_numpy_input():
    t = torch.tensor(HAND_SIMS)
    for direction in ("t2v", "v2t"):
        assert metrics.retrieval_metrics(
            t, torch.tensor(HAND_MASKS), direction
        ) == metrics.retrieval_metrics(HAND_SIMS, HAND_MASKS, direction)
    rel = np.random.default_rng(0).random(HAND_SIMS.shape).round(1)
    rel[:, 0] = 1  # every query has an item with R = 1: mAP defined
    assert metrics.ndcg(t, torch.tensor(rel)) == metrics.ndcg(HAND_SIMS, rel)
    assert metrics.mean_average_precision(
        t.double(), torch.tensor(rel)
    ) == metrics.mean_average_precision(HAND_SIMS.astype(np.float64), rel)
    assert metrics.retrieval_metrics(t.to(torch.bfloat16), HAND_MASKS) == metrics.retrieval_metrics(
        t.to(torch.bfloat16).float().numpy(), HAND_MASKS
    )


def test_bad_inputs_are_clear_errors():
    with pytest.raises(ValueError, match="rows must be num_videos"):
        metrics.retrieval_metrics(np.zeros((5, 3)))
    with pytest.raises(ValueError, match=r"expected \(num_videos, K\)"):
        metrics.retrieval_metrics(HAND_SIMS, np.ones((2, 3)))
    with pytest.raises(ValueError, match="direction"):
        metrics.retrieval_metrics(HAND_SIMS, HAND_MASKS, "x2y")
    bad = HAND_SIMS.copy()
    bad[1, 2] = np.nan
    with pytest.raises(ValueError, match="NaN at row 1, column 2"):
        metrics.retrieval_metrics(bad, HAND_MASKS)
    with pytest.raises(ValueError, match="only 0/1"):
        metrics.retrieval_metrics(HAND_SIMS, HAND_MASKS * 2)
    masked_nan = HAND_SIMS.copy()
    masked_nan[5] = np.nan  # a masked caption may hold anything
    assert metrics.retrieval_metrics(masked_nan, HAND_MASKS, "v2t") == metrics.retrieval_metrics(
        HAND_SIMS, HAND_MASKS, "v2t"
    )
    with pytest.raises(ValueError, match="every query is masked"):
        metrics.retrieval_metrics(HAND_SIMS, np.zeros((3, 2)))
    with pytest.raises(ValueError, match=r"relevance\[0, 1\] = 2"):
        metrics.ndcg(np.zeros((2, 2)), np.array([[0, 2.0], [0, 0]]))
    with pytest.raises(ValueError, match="shape"):
        metrics.ndcg(np.zeros((2, 2)), np.zeros((2, 3)))


# ----------------------------------------------------------------------------- nDCG / mAP
NDCG_SIMS = np.array(
    [
        [0.9, 0.8, 0.7, 0.6],  # ranked order 0, 1, 2, 3
        [0.1, 0.2, 0.3, 0.4],  # ranked order 3, 2, 1, 0
        [0.5, 0.4, 0.3, 0.2],
    ],
    dtype=np.float32,
)
NDCG_REL = np.array(
    [
        [0.0, 1.0, 0.5, 0.0],
        [1.0, 0.0, 0.0, 0.5],
        [0.0, 0.0, 0.0, 0.0],
    ]
)
# Row 0: k = 2; DCG = 0/log2(2) + 1/log2(3); IDCG = 1/log2(2) + 0.5/log2(3).
ROW0 = (1 / LOG2_3) / (1 + 0.5 / LOG2_3)  # 0.4796...
# Row 1: k = 2; DCG = rel(item 3)/1 + rel(item 2)/log2(3) = 0.5; IDCG as row 0.
ROW1 = 0.5 / (1 + 0.5 / LOG2_3)  # 0.3801...
# Row 2: no relevant item -> n/a (NaN), left out of the mean.


def test_ndcg_hand_worked():
    assert ROW0 == pytest.approx(0.479625, abs=1e-6)  # 0.630930 / 1.315465
    np.testing.assert_allclose(
        metrics.ndcg(NDCG_SIMS, NDCG_REL, reduction="none"), [ROW0, ROW1, np.nan]
    )
    assert metrics.ndcg(NDCG_SIMS, NDCG_REL) == pytest.approx((ROW0 + ROW1) / 2)
    assert metrics.defined_queries(metrics.ndcg(NDCG_SIMS, NDCG_REL, reduction="none")) == 2
    # masked rows are left out of the mean
    assert metrics.ndcg(NDCG_SIMS, NDCG_REL, query_masks=[1, 0, 0]) == pytest.approx(ROW0)
    none = metrics.ndcg(
        NDCG_SIMS, NDCG_REL, query_masks=np.array([[1], [0], [1]]), reduction="none"
    )
    assert np.isnan(none[1]) and none[0] == pytest.approx(ROW0)


def test_ndcg_ties_go_to_the_lower_column_first():
    sims = np.full((2, 3), 0.5)
    rel = np.array([[0, 1, 0], [1, 0, 0]])
    # k = 1: only the first ranked item counts, and that is column 0 (lowest index).
    np.testing.assert_array_equal(metrics.ndcg(sims, rel, reduction="none"), [0.0, 1.0])
    np.testing.assert_array_equal(
        metrics.ndcg(sims.astype(np.float32), rel, reduction="none"), [0.0, 1.0]
    )


MAP_SIMS = np.array([[0.9, 0.8, 0.7, 0.6, 0.5], [0.9, 0.8, 0.7, 0.6, 0.5]], dtype=np.float32)
MAP_REL = np.array([[1.0, 0.5, 0.0, 1.0, 0.25], [0.5, 0.0, 0.0, 0.0, 0.0]])


def test_map_hand_worked_graded_and_binary():
    # Row 0 in ranked order: relevance [1, .5, 0, 1, .25], graded cumsum [1, 1.5, 1.5, 2.5, 2.75];
    # relevant (== 1) at positions 1 and 4: AP = (1/1 + 2.5/4) / 2 = 0.8125.
    # binary cumsum [1, 1, 1, 2, 2]: AP = (1/1 + 2/4) / 2 = 0.75.  Row 1: no item with R = 1
    # -> n/a (NaN, as the reference's 0 / 0), left out of the mean.
    np.testing.assert_allclose(
        metrics.mean_average_precision(MAP_SIMS, MAP_REL, reduction="none"), [0.8125, np.nan]
    )
    np.testing.assert_allclose(
        metrics.mean_average_precision(MAP_SIMS, MAP_REL, binary=True, reduction="none"),
        [0.75, np.nan],
    )
    assert metrics.mean_average_precision(MAP_SIMS, MAP_REL) == pytest.approx(0.8125)
    assert metrics.mean_average_precision(
        MAP_SIMS, MAP_REL, query_masks=[True, False]
    ) == pytest.approx(0.8125)


def test_map_ties_go_to_the_lower_column_first():
    # All tied: order 0, 1, 2. Relevance [0, 0.5, 1]: the relevant item is third with graded
    # cumsum 1.5 -> AP = 1.5 / 3 = 0.5.
    assert metrics.mean_average_precision(
        np.zeros((1, 3), np.float32), [[0, 0.5, 1]]
    ) == pytest.approx(0.5)


def loop_ndcg_map(sims, rel, binary=False):
    """The EPIC-KITCHENS-100 reference formulas, one query at a time, stable tie order."""
    nd, ap = [], []
    for s, r in zip(sims.astype(np.float64), rel, strict=True):
        ranked = r[np.argsort(-s, kind="stable")]
        k = int((r > 0).sum())
        d = np.log2(np.arange(k) + 2)
        nd.append((ranked[:k] / d).sum() / (np.sort(r)[::-1][:k] / d).sum() if k else np.nan)
        hit = ranked == 1
        cum = np.cumsum(hit if binary else ranked)
        ap.append((cum[hit] / (np.flatnonzero(hit) + 1)).sum() / hit.sum() if hit.any() else np.nan)
    return np.nanmean(nd), np.nanmean(ap)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("rel_dtype", [np.float32, np.float64])  # float32 both: the key path
@pytest.mark.parametrize("sparsity", [0.5, 0.95])
@pytest.mark.parametrize("ranking", ["_ranking_by_radix", "_ranking_by_keys"])
def test_ndcg_map_match_loop_reference(dtype, rel_dtype, sparsity, ranking, monkeypatch):
    monkeypatch.setattr(metrics, "_float32_ranking", lambda: getattr(metrics, ranking))
    rng = np.random.default_rng(1)
    sims = rng.integers(-3, 3, size=(40, 60)).astype(dtype)  # many ties
    sims[0, :4] = [-0.0, 0.0, -0.0, 0.0]  # -0.0 == 0.0 must tie (lower column first)
    sims[1] = rng.standard_normal(60)
    rel = np.round(rng.random((40, 60)) * 4) / 4
    rel[rng.random((40, 60)) < sparsity] = 0
    rel[2] = 0
    rel[3, :] = 0
    rel[3, 59] = 1  # a row needing the full depth
    rel = rel.astype(rel_dtype)
    for block in (metrics._BLOCK, 130):  # one block; blocks of 2 rows
        monkeypatch.setattr(metrics, "_BLOCK", block)
        for binary in (False, True):
            nd, ap = loop_ndcg_map(sims, rel, binary)
            assert metrics.ndcg(sims, rel) == pytest.approx(nd, abs=1e-12)
            assert metrics.mean_average_precision(sims, rel, binary=binary) == pytest.approx(
                ap, abs=1e-12
            )
        transposed = metrics.relevance_metrics(sims.T.copy().T, rel.T.copy().T)  # Fortran order
        assert transposed == pytest.approx(metrics.relevance_metrics(sims, rel), abs=1e-15)
        assert metrics.relevance_metrics(sims, rel, reduction="none") == {
            "nDCG": pytest.approx(
                metrics.ndcg(sims, rel, reduction="none"), abs=1e-15, nan_ok=True
            ),
            "mAP": pytest.approx(
                metrics.mean_average_precision(sims, rel, reduction="none"), nan_ok=True
            ),
        }


def test_ties_rank_by_column_whatever_the_relevance():
    # Row 0: every score tied, relevance equal within the tie groups that matter; row 1: a
    # tie between different relevance values (ranked by column, not by relevance).
    sims = np.array([[0.5, 0.5, 0.5, 0.1], [0.3, 0.7, 0.3, 0.3]], dtype=np.float32)
    rel = np.array([[1, 1, 1, 0], [0.5, 0, 1, 0]], dtype=np.float32)
    # Row 1 order: col 1 (0.7), then ties by column 0, 2, 3 -> relevance [0, 0.5, 1, 0];
    # k = 2: DCG = 0 + 0.5/log2(3); IDCG = 1 + 0.5/log2(3). AP: relevant at position 2 with
    # graded cumsum 1.5 -> 1.5 / 3 = 0.5. Row 0: perfect, nDCG = AP = 1.
    nd = metrics.ndcg(sims, rel, reduction="none")
    np.testing.assert_allclose(nd, [1.0, (0.5 / LOG2_3) / (1 + 0.5 / LOG2_3)])
    np.testing.assert_allclose(
        metrics.mean_average_precision(sims, rel, reduction="none"), [1, 0.5]
    )


@pytest.mark.parametrize("ranking", ["_ranking_by_radix", "_ranking_by_keys"])
def test_float32_rankings_equal_a_stable_sort_on_special_floats(ranking):
    # Signed zeros (equal), infinities, subnormals, the extremes, neighbours that differ in
    # the low 16 bits only (1.0 and the next float32) or in the high ones (65536, 65537).
    rng = np.random.default_rng(3)
    tiny, top = np.float32(1e-45), np.finfo(np.float32).max
    special = np.array(
        [0.0, -0.0, np.inf, -np.inf, tiny, -tiny, 1.0, np.nextafter(np.float32(1), 2), -1.0,
         top, -top, 65536.0, 65537.0],
        dtype=np.float32,
    )  # fmt: skip
    sims = rng.choice(special, size=(40, 300))
    sims[20:] = rng.standard_normal((20, 300)).astype(np.float32).round(1)  # many ties
    rel = rng.random(sims.shape).astype(np.float32)
    order = np.argsort(-sims.astype(np.float64), axis=1, kind="stable")
    expected = np.take_along_axis(rel, order, axis=1)
    assert np.array_equal(getattr(metrics, ranking)(sims, rel), expected)
    assert np.array_equal(metrics._ranked_relevance(sims, rel), expected)  # the measured choice
    assert metrics._float32_ranking() in (metrics._ranking_by_radix, metrics._ranking_by_keys)


# ----------------------------------------------------------------------------- languages
def test_per_language_metrics_hand_worked():
    langs = [["mr", "hi"], ["mr", "en"], ["hi", "xx"]]  # the masked row's code is ignored
    out = metrics.per_language_metrics(HAND_SIMS, langs, HAND_MASKS)
    assert list(out) == ["mr", "hi", "en"]  # SUPPORTED order; no entry for absent languages
    # mr: rows 0, 2 -> ranks 0, 1 ; hi: rows 1, 4 -> 1.5, 2 ; en: row 3 -> 1
    assert out["mr"]["R1"] == 50.0 and out["mr"]["MnR"] == pytest.approx(1.5)
    assert out["hi"]["R1"] == 0.0 and out["hi"]["MdR"] == pytest.approx(2.75)
    assert out["en"]["MdR"] == pytest.approx(2.0)
    with pytest.raises(UnsupportedLanguageError, match="caption_langs\\[1\\]"):
        metrics.per_language_metrics(HAND_SIMS, ["mr", "fr", "mr", "mr", "mr", "mr"], HAND_MASKS)
    with pytest.raises(ValueError, match="one per sims row"):
        metrics.per_language_metrics(HAND_SIMS, ["mr"] * 5, HAND_MASKS)


def test_no_relevant_item_anywhere_is_nan_not_zero():
    # A perfect ranking of a matrix with no R = 1 item: mAP is undefined (the EPIC code's
    # 0 / 0), not 0; nDCG is still defined (items with R > 0 exist).
    sims = np.eye(3, dtype=np.float32)
    rel = np.full((3, 3), 0.5)
    out = metrics.relevance_metrics(sims, rel)
    assert np.isnan(out["mAP"]) and out["nDCG"] == pytest.approx(1.0)
    assert metrics.defined_queries(metrics.mean_average_precision(sims, rel, reduction="none")) == 0


def test_target_ranks_against_query_ranks_and_a_direct_loop():
    from rudder.evaluation.metrics import query_ranks, target_ranks

    rng = np.random.default_rng(3)
    sims = rng.integers(0, 4, size=(12, 5)).astype(np.float32)  # many ties
    # one caption per video: the ground truth of row i is column i // 1 for a 5 x 5 block
    square = sims[:5]
    np.testing.assert_array_equal(target_ranks(square, np.arange(5)), query_ranks(square))
    targets = rng.integers(0, 5, size=12)
    want = [sum(x > row[t] for x in row) + (sum(x == row[t] for x in row) - 1) / 2
            for row, t in zip(sims, targets, strict=True)]
    np.testing.assert_array_equal(target_ranks(sims, targets), want)
    with pytest.raises(ValueError, match="sims has NaN at row 1"):
        target_ranks(np.array([[0.0, 1.0], [np.nan, 0.0]]), [0, 1])
