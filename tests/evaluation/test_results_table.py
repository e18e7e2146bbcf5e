"""Printed result tables: n/a metrics, left-out columns and their notes; seed summaries."""

import pytest

from rudder.errors import ConfigError
from rudder.evaluation.results_table import results_table, seeds_table
from rudder.evaluation.selection import selection_score
from rudder.train import aggregate_seeds


def _test(map_value, map_queries):
    ranks = {"R1": 10.0, "R5": 50.0, "R10": 70.0, "R50": 99.0, "MdR": 5.0, "MnR": 8.0}
    direction = {**ranks, "nDCG": 70.0, "nDCG_queries": 4, "mAP": map_value,
                 "mAP_queries": map_queries}
    return {"t2v": dict(direction), "v2t": dict(direction), "per_language": {"mr": ranks}}


def test_a_column_na_everywhere_is_left_out_with_a_note():
    text = results_table({"test": _test(None, 0), "best_epoch": 3, "epochs_run": 9})
    header = next(line for line in text.splitlines() if line.startswith("| queries"))
    assert "mAP" not in header and "nDCG" in header
    assert "| text→video | 10.0 | 50.0 | 70.0 | 99.0 | 5.0 | 8.0 | 70.0 |" in text
    # Each note names the items its metric counts (R = 1 for mAP, R > 0 for nDCG), so "no
    # query has one" and "computed over 4 queries that have one" do not read as a contradiction.
    assert ("mAP: n/a, no query has an item with R = 1 (what mAP counts as relevant) at this "
            "rho; column left out") in text
    assert "nDCG: the mean over the queries that have an item with R > 0: t2v 4, v2t 4" in text


def test_a_partly_defined_column_is_kept_with_its_query_count():
    test = _test(40.0, 3)
    test["v2t"]["mAP"], test["v2t"]["mAP_queries"] = None, 0
    text = results_table({"test": test})
    assert "| mAP |" in text.splitlines()[2] + " |"
    assert "| 70.0 | 40.0 |" in text and "| 70.0 | n/a |" in text
    assert "mAP: the mean over the queries that have an item with R = 1: t2v 3" in text


def test_seeds_keep_na_and_the_table_leaves_it_out():
    summary = aggregate_seeds({0: {"test": _test(None, 0)}, 1: {"test": _test(None, 0)}})
    assert summary["test"]["t2v"]["mAP"] == {"mean": None, "std": None}
    assert summary["test"]["t2v"]["R1"] == {"mean": 10.0, "std": 0.0}
    text = seeds_table(summary)
    assert "mAP: n/a" in text and "| mAP" not in text


def test_selecting_on_an_na_metric_is_a_clear_error():
    with pytest.raises(ConfigError, match="n/a"):
        selection_score(_test(None, 0), "t2v.mAP")
    assert selection_score(_test(None, 0), "t2v.nDCG") == 70.0


def _without_classes():
    """metrics.json of a dataset without noun/verb columns: no nDCG or mAP anywhere."""
    ranks = {"R1": 10.0, "R5": 50.0, "R10": 70.0, "R50": 99.0, "MdR": 5.0, "MnR": 8.0}
    return {"t2v": dict(ranks), "v2t": dict(ranks), "per_language": {"en": ranks}}


def test_a_dataset_without_noun_verb_classes_gets_no_relevance_columns_and_one_note():
    text = results_table({"test": _without_classes(), "best_epoch": 1, "epochs_run": 2})
    lines = text.splitlines()
    assert lines[2] == "| queries | R1 | R5 | R10 | R50 | MdR | MnR |"
    assert "| text→video | 10.0 | 50.0 | 70.0 | 99.0 | 5.0 | 8.0 |" in text
    assert "| - " not in text  # no column of dashes
    notes = [line for line in lines if "noun/verb classes" in line]
    assert notes == [("nDCG and mAP: n/a, the dataset has no noun/verb classes (relevance needs "
                      "them; add them with `python -m heuristics label`); columns left out")]
    summary = aggregate_seeds({0: {"test": _without_classes()}, 1: {"test": _without_classes()}})
    seeds = seeds_table(summary)
    assert "| nDCG" not in seeds and "| mAP" not in seeds and notes[0] in seeds


@pytest.mark.slow
def test_training_and_fused_evaluation_on_a_dataset_without_classes_print_no_dashes(
        tmp_path, capsys):
    """As on a folder of one's own videos (`build videos` writes no noun/verb columns)."""
    import numpy as np

    from rudder import train
    from rudder.data.layout import ExpertInfo
    from rudder.evaluation import evaluate

    from ..factories import caption, write_dataset

    rng = np.random.default_rng(0)
    videos = [f"v{i:02d}" for i in range(30)]
    splits = dict(zip(videos, ["train"] * 18 + ["validation"] * 6 + ["test"] * 6, strict=True))
    captions = [caption(f"{v}-en", v, "en", f"make the toy {i % 7} with {i % 5} parts")
                for i, v in enumerate(videos)]
    folder = write_dataset(tmp_path / "own", splits, captions,
                           {"object": (ExpertInfo(8), videos, rng.normal(size=(30, 8)))},
                           languages=["en"])
    flags = ["--dataset", str(folder), "--epochs", "1", "--set", "data.batch_size=6",
             "--set", "model.shared_dim=8", "--set", "model.word_dim=8",
             "--set", "data.caption_langs=[en]"]
    for seed in (0, 1):
        train.main([*flags, "--seed", str(seed), "--output-dir", str(tmp_path / f"r{seed}")])
    evaluate.main(["--fuse", str(tmp_path / "r0"), str(tmp_path / "r1"), "--output",
                   str(tmp_path / "fused")])
    printed = capsys.readouterr().out
    headers = [line for line in printed.splitlines() if line.startswith("| queries")]
    assert headers == ["| queries | R1 | R5 | R10 | R50 | MdR | MnR |"] * 3
    assert printed.count("nDCG and mAP: n/a, the dataset has no noun/verb classes") == 3
