"""Table aggregation and the two Wilcoxon readings on hand-made results."""

import csv
import io

import numpy as np
import pytest

from experiments import tables
from experiments.collect import RowResult, per_query
from rudder.evaluation import significance

NAN = np.nan


def _row(label, seeds, t2v, v2t=None, metrics=None, ids=None):
    t2v = np.asarray(t2v, dtype=float)
    if v2t is None:  # one caption per video: as many videos as t2v queries
        v2t = np.zeros_like(t2v)
    v2t = np.asarray(v2t, dtype=float)
    if metrics is None:
        metrics = [{"t2v": _rank_metrics(r), "v2t": _rank_metrics(v)}
                   for r, v in zip(t2v, v2t, strict=True)]
    return RowResult(label, list(seeds), metrics, {"t2v": t2v, "v2t": v2t}, query_ids=ids)


def _rank_metrics(ranks):
    r = ranks[~np.isnan(ranks)]
    return {
        "R1": 100 * np.mean(r == 0),
        "R5": 100 * np.mean(r < 5),
        "MdR": np.median(r) + 1,
        "MnR": np.mean(r) + 1,
    }


def test_mean_std_and_interval_by_hand():
    # seed 0 ranks (0, 1, 4), seed 1 ranks (0, 0, 2); the 4th query is masked in both.
    row = _row("A", [0, 1], [[0, 1, 4, NAN], [0, 0, 2, NAN]])
    s = tables.summarise(row, n_resamples=200)["t2v"]
    assert s["R1"]["mean"] == pytest.approx(50.0)  # (33.3 + 66.7) / 2
    assert set(s) == set(tables.RANK_METRICS)  # every rank metric, from the ranks alone
    assert s["R1"]["std"] == pytest.approx(np.sqrt(2 * (100 / 6) ** 2))  # ddof=1
    assert s["MdR"]["mean"] == pytest.approx(1.5)  # (2 + 1) / 2
    assert s["MnR"]["mean"] == pytest.approx((8 / 3 + 5 / 3) / 2)
    assert (
        s["R5"]["mean"] == 100 and s["R5"]["ci_low"] == s["R5"]["ci_high"] == 100
    )  # no query can change it
    assert 0 <= s["R1"]["ci_low"] <= 50 <= s["R1"]["ci_high"] <= 100
    assert "nDCG" not in s  # no per-query nDCG: left out


def test_interval_resamples_queries_jointly_over_seeds():
    # Seed 1 is seed 0 mirrored: per resample, mean R1 over seeds is always 50 when the same
    # queries are drawn for both seeds, so the paired interval collapses to a point.
    row = _row("A", [0, 1], [[0, 0, 9, 9], [9, 9, 0, 0]])
    s = tables.summarise(row, n_resamples=300)["t2v"]["R1"]
    assert (s["mean"], s["ci_low"], s["ci_high"]) == (50, 50, 50)
    assert s["std"] == 0


def test_metrics_json_disagreeing_with_the_ranks_is_an_error():
    metrics = [{"t2v": {"R1": 10.0}, "v2t": {}}]
    with pytest.raises(ValueError, match="seed 0: t2v R1 from per-query values .* differs from "
                       "metrics.json"):
        tables.check_against_metrics(_row("A", [0], [[0, 3]], metrics=metrics))
    tables.check_against_metrics(_row("A", [0], [[0, 3]]))  # agrees: no error
    scores = [{"t2v": {"nDCG": 50.0}, "v2t": {}}]
    row = _row("A", [0], [[0, 3]], metrics=scores)
    row.scores = {"t2v": {"nDCG": np.array([[0.2, 0.4]])}}
    with pytest.raises(ValueError, match="nDCG"):
        tables.check_against_metrics(row)
    tables.check_against_metrics(row, scores=False)  # another relevance definition


def test_a_row_of_one_run_has_no_spread():
    one = tables.summarise(_row("Fusion", [-1], [[0, 1, 4]]), n_resamples=20)["t2v"]["R1"]
    assert one["mean"] == pytest.approx(100 / 3) and one["std"] is None
    text = tables.markdown({"Fusion": {"t2v": {"R1": one}, "v2t": {}}}, [])
    assert "| Fusion | 33.3 ± n/a [" in text and "± 0.0" not in text
    csv_text = tables.metrics_csv("s", {"Fusion": {"t2v": {"R1": one}, "v2t": {}}},
                                  {"Fusion": 1})
    assert "s,Fusion,t2v,R1,33.3333,n/a," in csv_text


def test_wilcoxon_averages_ranks_over_seeds_and_pairs_median_ranks_by_seed():
    a = _row("A", [0, 1], [[2, 3, 4], [1, 6, 7]])
    b = _row("B", [1, 0], [[5, 4, 1], [2, 2, 2]])  # seeds stored in the other order
    t = tables.compare(a, b)
    # Per query: averages A [1.5, 4.5, 5.5], B [3.5, 3, 1.5] -> d = [-2, 1.5, 4], |d| ranks
    # 2, 1, 3: W- = 2, W+ = 4 -> W = 2; exact two-sided p: 3 of 8 sign patterns have a
    # negative-rank sum <= 2 ({}, {1}, {2}) -> p = 6/8. Three queries, not six seed x query pairs.
    assert (t["captions"], t["nonzero_captions"], t["w_caption"]) == (3, 3, 2.0)
    assert t["p_caption"] == pytest.approx(0.75)
    # one caption per video: the per-video test is the per-caption one
    assert (t["videos"], t["w_video"], t["p_video"]) == (3, 2.0, pytest.approx(0.75))
    assert t["diff"] == pytest.approx(t["mean_a"] - t["mean_b"])
    assert t["mean_a"] == pytest.approx(23 / 6 + 1) and t["seeds"] == [0, 1]
    # Over runs x videos: every run of each row, unpaired (seed order plays no part).
    crossed = significance.crossed_random_effects_test(a.ranks["t2v"], b.ranks["t2v"], [0, 1, 2])
    boot = significance.hierarchical_bootstrap(a.ranks["t2v"], b.ranks["t2v"], [0, 1, 2],
                                               tables.BOOT_RESAMPLES)
    assert (t["runs_a"], t["runs_b"]) == (2, 2)
    assert (t["p_runs"], t["se_runs"], t["df_runs"]) == (crossed.pvalue, crossed.se, crossed.df)
    assert (t["diff_ci_low_runs"], t["diff_ci_high_runs"]) == (crossed.low, crossed.high)
    assert (t["p_boot"], t["diff_ci_low_boot"]) == (boot.pvalue, boot.low)
    assert t["diff"] == crossed.estimate
    # Across seeds, paired seed with seed: MdR A [4, 7], B [3, 5] -> d = [1, 2], W = 0,
    # p = 2 * 1/4.
    assert (t["mdr_a"], t["mdr_b"]) == ([4.0, 7.0], [3.0, 5.0])
    assert t["w_mdr_across_seeds"] == 0.0 and t["p_mdr_across_seeds"] == pytest.approx(0.5)


def test_wilcoxon_uses_only_shared_seeds_and_drops_masked_queries():
    a = _row("A", [0, 1, 2], [[1, NAN, 2], [0, NAN, 0], [9, NAN, 9]])
    b = _row("B", [2, 0], [[9, NAN, 9], [2, NAN, 1]])
    t = tables.compare(a, b)
    # seeds 0 and 2: A averages [5, -, 5.5], B [5.5, -, 5] -> two nonzero differences
    assert t["seeds"] == [0, 2] and t["captions"] == 2 and t["nonzero_captions"] == 2
    with pytest.raises(ValueError, match="share no seed"):
        tables.compare(a, _row("C", [7], [[1, NAN, 1]]))
    with pytest.raises(ValueError, match="different test queries"):
        tables.compare(
            _row("A", [0], [[1]], ids=np.array(["x"])), _row("B", [0], [[1]], ids=np.array(["y"]))
        )


def test_markdown_and_csv():
    rows = {
        "MM": _row("MM", [0, 1], [[0, 1, 4], [0, 0, 2]]),
        "PO": _row("PO", [0, 1], [[0, 0, 4], [0, 0, 1]]),
    }
    summaries = {k: tables.summarise(r, n_resamples=50) for k, r in rows.items()}
    tests = tables.adjust([tables.compare(rows["PO"], rows["MM"], d) for d in ("t2v", "v2t")])
    text = tables.markdown(summaries, tests, "# Title")
    assert text.startswith("# Title")
    assert "| MM | 50.0 ± 23.6 [" in text and "## Video → text" in text
    # PO averages [0, 0, 2.5], MM [0, 0.5, 3]: three videos of one caption, two nonzero
    for d in ("t2v", "v2t"):
        assert f"| PO | MM | {d} | mean rank | 2, 2 | 3 |" in text
    assert "| p, runs x videos | Holm | bootstrap [95% CI] | p, bootstrap | Holm |" in text
    csv_text = tables.metrics_csv("s", summaries, {"MM": 2, "PO": 2}, {"MM": 0, "PO": 1})
    assert csv_text.splitlines()[0] == (
        "suite,row,direction,metric,mean,std,ci_low,ci_high,seeds,queries")
    assert "s,MM,t2v,R1,50,23.5702," in csv_text
    assert "s,MM,-,runs_at_epoch_cap,0,,,,2," in csv_text
    assert "s,PO,-,runs_at_epoch_cap,1,,,,2," in csv_text
    header, t2v_line, v2t_line = tables.tests_csv("s", tests).splitlines()
    assert header.startswith("suite,a,b,direction,metric,runs_a,runs_b,videos,mean_a,mean_b,diff,")
    for column in ("p_runs", "p_runs_holm", "se_runs", "df_runs", "p_boot", "p_boot_holm",
                   "p_video", "p_video_holm", "diff_ci_low_video", "p_caption", "p_caption_holm"):
        assert column in header.split(",")
    assert t2v_line.startswith("s,PO,MM,t2v,rank,2,2,3,") and t2v_line.endswith(
        ",1 1,2 1,0,1,0 1"
    )  # MdR PO [1, 1], MM [2, 1]
    fields = dict(zip(header.split(","), v2t_line.split(","), strict=True))
    assert fields["p_caption"] == "" and fields["captions"] == ""  # v2t: per video only
    # Holm over the table's two per-video p-values: min(1, 2 * smaller), then the larger
    for key in ("p_video", "p_runs"):
        p = sorted(t[key] for t in tests)
        assert min(t[f"{key}_holm"] for t in tests) == pytest.approx(min(1, 2 * p[0]))


def test_na_metrics_are_na_and_an_all_na_column_is_left_out():
    ranks = [[0, 1, 4], [0, 0, 2]]
    metrics = [{"t2v": {**_rank_metrics(np.array(r, float)), "mAP": None, "mAP_queries": 0},
                "v2t": _rank_metrics(np.zeros(3))} for r in ranks]
    row = _row("MM", [0, 1], ranks, metrics=metrics)
    row.scores = {"t2v": {"mAP": np.full((2, 3), NAN)}}
    summary = tables.summarise(row, n_resamples=20)
    assert summary["t2v"]["mAP"]["mean"] is None and summary["t2v"]["mAP"]["queries"] == 0
    text = tables.markdown({"MM": summary}, [])
    assert "| mAP" not in text
    assert ("mAP: n/a in every row, so the column is left out: no query has an item with "
            "R = 1 at the protocol's rho.") in text
    assert "computed over" not in text  # no claim about queries it was not computed over
    csv_text = tables.metrics_csv("s", {"MM": summary}, {"MM": 2})
    assert "s,MM,t2v,mAP,n/a,n/a,,,2,0" in csv_text


def test_video_of_queries_is_video_major():
    row = _row("A", [0], [[0, 1, 2, 3, 4, 5]], v2t=[[0, 1, 2]])
    np.testing.assert_array_equal(tables.video_of_queries(row, "t2v"), [0, 0, 1, 1, 2, 2])
    np.testing.assert_array_equal(tables.video_of_queries(row, "v2t"), [0, 1, 2])


def test_wilcoxon_csv_writes_large_w_exactly():
    rows = [_row(label, [0], [[0, 1, 4]]) for label in ("A", "B")]
    test = {**tables.compare(*rows), "w_caption": 131577.5, "w_mdr_across_seeds": 2.5}
    written = next(csv.DictReader(io.StringIO(tables.tests_csv("s", [test]))))
    assert (written["w_caption"], written["w_mdr_across_seeds"]) == ("131577.5", "2.5")


def test_per_query_matches_the_metrics_module():
    from rudder.evaluation import metrics

    rng = np.random.default_rng(0)
    sims = rng.normal(size=(6, 3))  # 3 videos x 2 captions, the last caption masked
    masks = np.array([[1, 1], [1, 1], [1, 0]])
    rel = rng.uniform(size=(6, 3)) * (rng.uniform(size=(6, 3)) > 0.5)
    rel[np.arange(6), np.arange(6) // 2] = 1.0  # each caption fully relevant to its video
    ranks, scores = per_query(sims, masks, rel)
    valid = masks.reshape(-1).astype(bool)
    assert np.isnan(ranks["t2v"][5]) and np.isnan(scores["t2v"]["nDCG"][5])
    assert np.nanmean(scores["t2v"]["nDCG"]) == pytest.approx(metrics.ndcg(sims[valid], rel[valid]))
    assert np.mean(scores["v2t"]["mAP"]) == pytest.approx(
        metrics.mean_average_precision(sims[valid].T, rel[valid].T)
    )
    assert metrics.metrics_from_ranks(ranks["v2t"]) == metrics.retrieval_metrics(sims, masks, "v2t")


def test_per_query_v2t_scores_skip_videos_without_a_caption():
    from rudder.evaluation import metrics

    rng = np.random.default_rng(1)
    sims = rng.normal(size=(6, 3))  # 3 videos x 2 captions; video 2 has none
    masks = np.array([[1, 1], [1, 0], [0, 0]])
    rel = rng.uniform(size=(6, 3))
    rel[np.arange(6), np.arange(6) // 2] = 1.0
    ranks, scores = per_query(sims, masks, rel)
    assert np.isnan(ranks["v2t"][2]) and np.isnan(scores["v2t"]["nDCG"][2])
    valid = masks.reshape(-1).astype(bool)
    assert scores["v2t"]["mAP"][:2] == pytest.approx(
        metrics.mean_average_precision(sims[valid][:, :2].T, rel[valid][:, :2].T, reduction="none"))


def test_score_notes_say_what_each_metric_is_computed_over():
    row = _row("MM", [0, 1], [[0, 1, 4], [0, 0, 2]])
    row.scores = {"t2v": {"nDCG": np.array([[0.5, NAN, 1], [0.25, NAN, 1]]),
                          "mAP": np.full((2, 3), NAN)}}
    text = tables.markdown({"MM": tables.summarise(row, n_resamples=20)}, [])
    assert ("nDCG: the mean over the queries that have an item with R > 0 (2 queries here; a "
            "query with none has no value; the CSV's `queries`).") in text
    assert "mAP: n/a in every row, so the column is left out" in text


def test_compare_on_ndcg_is_in_percent_and_higher_is_better():
    a = _row("A", [0, 1], [[0, 1, 4], [0, 0, 2]])
    b = _row("B", [0, 1], [[1, 1, 4], [0, 2, 2]])
    a.scores = {"t2v": {"nDCG": np.array([[1.0, 0.5, NAN], [1.0, 1.0, NAN]])}}
    b.scores = {"t2v": {"nDCG": np.array([[0.5, 0.5, NAN], [1.0, 0.5, NAN]])}}
    t = tables.compare(a, b, "t2v", "nDCG")
    assert t["metric"] == "nDCG" and t["mean_a"] == pytest.approx(87.5)
    assert t["diff"] == pytest.approx(87.5 - 62.5)  # positive: A is better
    assert t["mdr_a"] == [] and np.isnan(t["p_mdr_across_seeds"])  # ranks only
    crossed = significance.crossed_random_effects_test(100 * a.scores["t2v"]["nDCG"],
                                                       100 * b.scores["t2v"]["nDCG"], [0, 1, 2])
    assert t["p_runs"] == crossed.pvalue
    with pytest.raises(ValueError, match="no per-query mAP"):
        tables.compare(a, b, "t2v", "mAP")
