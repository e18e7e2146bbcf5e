"""experiments.transfer: the zero- and few-shot copies, paired ratios, intervals, the choice."""

import math

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
import pytest

from experiments import transfer
from experiments.transfer import (
    LANGS,
    Row,
    _keep_fraction,
    choose,
    drop_captions,
    interval,
    language_hits,
    report,
    segment_pairs,
    summarise,
)


def test_a_fraction_of_the_videos_keeps_its_tamil_and_telugu_captions(tmp_path):
    videos = [f"v{i}" for i in range(10)]
    rows = {"video_id": videos * 3, "lang": ["mr"] * 10 + ["ta"] * 10 + ["te"] * 10}
    path = tmp_path / "train.parquet"
    pq.write_table(pa.table(rows), path)
    _keep_fraction(path, 0.3, seed=0)
    kept = pq.read_table(path).to_pydict()
    assert kept["lang"].count("mr") == 10  # Marathi untouched
    ta = {v for v, g in zip(kept["video_id"], kept["lang"], strict=True) if g == "ta"}
    te = {v for v, g in zip(kept["video_id"], kept["lang"], strict=True) if g == "te"}
    assert len(ta) == 3 and ta == te  # the same 3 videos keep both languages
    pq.write_table(pa.table(rows), path)
    _keep_fraction(path, 0.3, seed=0)
    assert pq.read_table(path).to_pydict() == kept  # seeded


def test_the_zero_shot_copy_drops_the_captions_and_their_relations(tmp_path):
    (tmp_path / "captions").mkdir()
    (tmp_path / "relations").mkdir()
    pq.write_table(pa.table({"caption_id": ["a", "b", "c"], "lang": ["mr", "ta", "te"]}),
                   tmp_path / "captions" / "train.parquet")
    pq.write_table(pa.table({"caption_id_a": ["a", "a", "b"], "caption_id_b": ["x", "c", "a"]}),
                   tmp_path / "relations" / "all.parquet")
    drop_captions(tmp_path, lambda t: pc.is_in(t.column("lang"), pa.array(["ta", "te"])))
    assert pq.read_table(tmp_path / "captions" / "train.parquet").column(
        "caption_id").to_pylist() == ["a"]
    assert pq.read_table(tmp_path / "relations" / "all.parquet").to_pydict() == {
        "caption_id_a": ["a"], "caption_id_b": ["x"]}


CAPTIONS = {  # two segments of v1 (one with two Marathi captions), one of v2
    "caption_id": ["m1", "m2", "m3", "t1", "t2", "t3", "h1"],
    "video_id": ["v1", "v1", "v2", "v1", "v2", "v3", "v1"],
    "lang": ["mr", "mr", "mr", "ta", "ta", "ta", "hi"],
    "start": [0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 5.0],
    "end": [5.0, 5.0, 4.0, 5.0, 4.0, 4.0, 9.0],
}


def test_pairs_join_a_caption_to_the_marathi_caption_of_its_segment():
    assert segment_pairs(CAPTIONS, "ta") == {"t1": "m1", "t2": "m3"}  # t3: no mr segment
    assert segment_pairs(CAPTIONS, "hi") == {}


def test_hits_and_paired_hits_worked_by_hand():
    ranks = {"m1": 0, "m2": 12, "m3": 9, "t1": 3, "t2": 10, "t3": 0, "h1": 50}
    langs = dict(zip(CAPTIONS["caption_id"], CAPTIONS["lang"], strict=True))
    pairs = {"ta": segment_pairs(CAPTIONS, "ta"), "hi": {}}
    hits = language_hits(ranks, langs, pairs)
    assert hits["mr"] == {"R10": pytest.approx(200 / 3), "queries": 3}
    # ta: t1 and t3 hit (2 of 3); paired: t1 hits, t2 (rank 10) misses; partners m1, m3 hit
    assert hits["ta"] == {"R10": pytest.approx(200 / 3), "queries": 3, "paired_R10": 50.0,
                          "partner_R10": 100.0, "pairs": 2}
    assert hits["hi"] == {"R10": 0.0, "queries": 1}


def test_interval_is_students_t_over_seeds():
    mean, half = interval([1.0, 2.0, 3.0])
    assert mean == 2.0 and half == pytest.approx(4.303 * 1.0 / math.sqrt(3))
    assert interval([5.0]) == (5.0, None)  # one seed: no spread, printed n/a
    assert transfer.fmt((5.0, None)) == "5.0 ± n/a" and transfer.fmt((5.0, 0.25)) == "5.0 ± 0.2"


def seed_result(mr, ta, ta_paired, partner):
    return {"mr": {"R10": mr, "queries": 3},
            "ta": {"R10": ta, "queries": 3, "paired_R10": ta_paired, "partner_R10": partner,
                   "pairs": 2}}


def test_ratios_are_computed_per_seed_then_averaged():
    summary = summarise([seed_result(80, 40, 30, 60), seed_result(40, 40, 30, 30)])
    assert summary["ta"]["ratio"][0] == pytest.approx((0.5 + 1.0) / 2)
    assert summary["ta"]["paired_ratio"][0] == pytest.approx((0.5 + 1.0) / 2)
    assert summary["mr"]["R10"][0] == 60 and summary["ta"]["pairs"] == 2


def row(training, pivots, mr_validation, via=(), nullspace=0, proxy_choice=None):
    cell = {"R10": (mr_validation, 0.0), "queries": 3}
    test = {lang: {"R10": (50.0, 1.0), "ratio": (0.6, 0.1), "paired_ratio": (0.4, 0.1),
                   "queries": 3, "pairs": 2} for lang in LANGS}
    if proxy_choice is None:
        proxy_choice = bool(pivots) and not via
    return Row(training, training, pivots, test, {"mr": cell}, [0, 1], via, nullspace,
               proxy_choice)


def test_the_choice_reads_marathi_validation_only():
    rows = [row("e5-mr", 0, 90.0), row("e5-mr", 5, 70.0), row("e5-mr-whiten", 5, 80.0),
            row("e5-mr+hi+en-whiten", 5, 95.0), row("e5-mr+tate25-whiten", 0, 99.0)]
    # trained on Marathi only, zero-shot path (pivots on): the best Marathi validation
    assert choose(rows) is rows[2]
    hub = [*rows, row("e5-mr", 5, 95.0, ("en",))]
    assert choose(hub) is rows[2]  # pivots through English are reported, never chosen
    header = {"dataset_note": "sample", "command": "c", "commit": "abc", "dataset": "sample",
              "fingerprint": "f", "zero_shot_fingerprint": "z", "seeds": "0, 1",
              "machine": "m", "test_videos": 160, "queries": dict.fromkeys(LANGS, 3),
              "pairs": dict.fromkeys(LANGS, 2)}
    text = report(rows, header, rows[2], {"e5-mr": {(0, 1): 60.0, (0, 5): 65.0, (0, 20): 50.0}})
    assert "| e5-mr-whiten **(chosen)** | 5 | 0, 1 |" in text
    assert "50.0 ± 1.0 ZS (×0.60 ± 0.10; ×0.40 ± 0.10)" in text  # ta in a Marathi-only row
    assert "50.0 ± 1.0 few (×0.60" in text  # ta in the few-shot row
    through = report([row("e5-mr", 5, 70.0, ("en",))], header, None, {})
    assert "| e5-mr | 5 via en |" in through and "50.0 ± 1.0 piv (" in through
    assert "True zero-shot target (ta and te ≥ 0.5 × mr" in text and ": missed (" in text
    assert "k=5 65.0" in text and "commit abc" in text


def test_the_pivot_search_m_is_chosen_by_the_marathi_proxy_and_reported():
    """Of one training's pivot rows, only the one whose (m, k) the Marathi proxy chose can
    be chosen; the report names m and shows the transductive oracle as a diagnostic,
    outside the table and not as zero-shot."""
    name = "e5-mr-lir-whiten-fit3"
    plain = row(name, 5, 80.0, proxy_choice=False)
    null = row(name, 5, 80.0, nullspace=16, proxy_choice=True)
    assert choose([plain, null]) is null
    assert choose([row(name, 5, 80.0, proxy_choice=True), null]).nullspace == 0  # ties: earlier
    header = {"dataset_note": "sample", "command": "c", "commit": "abc", "dataset": "sample",
              "fingerprint": "f", "zero_shot_fingerprint": "z", "seeds": "0, 1",
              "machine": "m", "test_videos": 160, "queries": dict.fromkeys(LANGS, 3),
              "pairs": dict.fromkeys(LANGS, 2)}
    oracle = {lang: {"R10": (30.0, 2.0), "ratio": (0.37, 0.02), "paired_ratio": (0.35, 0.03)}
              for lang in ("ta", "te")}
    text = report([plain, null], header, null,
                  {name: {(0, 5): 65.0, (16, 5): 66.0}}, {name: oracle})
    assert f"| {name} **(chosen)** | 5, null 16 |" in text
    assert "m=0 k=5 65.0, m=16 k=5 66.0" in text
    assert "searched after removing 16 translation-difference directions" in text
    assert "**not zero-shot**" in text and "ta 30.0 ± 2.0 (×0.37 ± 0.02; ×0.35 ± 0.03" in text
    assert text.count("| e5-mr-lir") == 2  # the oracle is no row of the table


def test_every_training_says_which_languages_it_reads():
    assert transfer.text_used("e5-mr-whiten") == {"mr"}
    assert transfer.text_used("e5-mr-whiten-fit3") == {"mr", "hi", "en"}
    assert transfer.text_used("e5-mr+hi+en-whiten") == {"mr", "hi", "en"}
    for name, spec in transfer.TRAININGS.items():
        if spec.fraction is None:
            assert not set(transfer.TARGETS) & transfer.text_used(name), name
