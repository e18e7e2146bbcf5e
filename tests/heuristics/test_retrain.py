"""``python -m heuristics retrain``: settled app labels train a PO(M) run that records them."""

import json
import sqlite3

import pyarrow.parquet as pq
import pytest
import yaml

from app.annotations_db import AnnotationStore
from heuristics.__main__ import main
from heuristics.retrain import RetrainError, read_app_labels, retrain_config, settled_relations
from rudder.data.layout import DatasetFolder
from rudder.runs.layout import checkpoints_under

TINY = "tiny"  # the rudder.json name of tests/factories.concept_dataset


@pytest.fixture(scope="module")
def concept(tmp_path_factory):
    """The learnable toy dataset of tests/factories.py (train, validation and test splits)."""
    from tests.factories import concept_dataset

    return concept_dataset(tmp_path_factory.mktemp("concept") / "tiny")


@pytest.fixture
def store(tmp_path):
    return AnnotationStore(tmp_path / "labels.sqlite")


def label_pairs(store):
    """Train-split pairs: one agreed, one majority, one tie, one single, one undone."""
    store.add(TINY, "asha", "v000-en", "v001-en", "partial")
    store.add(TINY, "ravi", "v000-en", "v001-en", "partial")
    for name, label in (("asha", "positive"), ("ravi", "positive"), ("mina", "negative")):
        store.add(TINY, name, "v002-en", "v003-mr", label)
    store.add(TINY, "asha", "v004-en", "v005-en", "negative")
    store.add(TINY, "ravi", "v004-en", "v005-en", "partial")
    store.add(TINY, "mina", "v006-mr", "v007-mr", "description")
    store.add(TINY, "mina", "v008-mr", "v009-mr", "positive")
    store.undo(TINY, "mina")
    store.add("another-dataset", "asha", "x", "y", "partial")


def test_settled_labels_and_their_record(concept, store):
    label_pairs(store)
    records = read_app_labels(store.path, TINY)
    assert len(records) == 8  # the undone label and the other dataset are not read
    table, record = settled_relations(records, [], DatasetFolder(concept))
    rows = sorted(zip(*(table.column(c).to_pylist()
                        for c in ("caption_id_a", "caption_id_b", "label", "annotator")),
                      strict=True))
    assert rows == [("v000-en", "v001-en", 1, "settled"), ("v002-en", "v003-mr", 2, "settled"),
                    ("v006-mr", "v007-mr", 3, "settled")]
    assert record["labels"] == 3 and record["unsettled"] == 1
    assert record["settled"] == {"single": 1, "agreed": 1, "majority": 1, "adjudicated": 0}
    assert record["annotators"] == ["asha", "mina", "ravi"]
    assert record["first_label"] <= record["last_label"]
    assert record["in_training_split"] == 3
    # an adjudicator settles the tie
    _, judged = settled_relations(records, ["ravi"], DatasetFolder(concept))
    assert judged["labels"] == 4 and judged["unsettled"] == 0


def test_dataset_relations_are_kept_unless_replaced(tmp_path, store):
    from tests.factories import concept_dataset

    dataset = concept_dataset(tmp_path / "with-relations", relations=[
        ("v000-en", "v001-en", 0, "old"), ("v010-en", "v011-en", 2, "old")])
    store.add(TINY, "asha", "v000-en", "v001-en", "partial")
    records = read_app_labels(store.path, TINY)
    table, record = settled_relations(records, [], DatasetFolder(dataset))
    assert sorted(zip(table.column("caption_id_a").to_pylist(), table.column("label").to_pylist(),
                      strict=True)) == [("v000-en", 1), ("v010-en", 2)]
    assert record["dataset_relations_kept"] == 1 and record["relations"] == 2
    alone, _ = settled_relations(records, [], DatasetFolder(dataset), only_app_labels=True)
    assert alone.num_rows == 1


def test_the_po_manual_config_starts_from_the_base_run(concept, tmp_path):
    base = tmp_path / "base"
    base.mkdir()
    (base / "config.yaml").write_text(yaml.safe_dump(
        {"name": "quick", "epochs": 3, "loss": {"name": "mm", "params": {"margin": 0.3}},
         "data": {"dataset": str(concept), "caption_langs": ["mr", "en"],
                  "caption_sampling": "all"}}))
    config = retrain_config(str(concept), base, seed=4, overrides=["optim.lr=0.01"])
    assert config.name == "quick-retrained" and config.epochs == 3 and config.seed == 4
    assert config.loss.name == "po" and config.loss.params == {}
    assert config.data.caption_sampling == "random" and config.data.caption_langs == ["mr", "en"]
    sup = config.supervision
    assert sup.manual_relations and sup.relation_batches and sup.description_labels
    assert sup.relation_pinning == "drawn"  # the default pins every video of a kept pair
    assert sup.relations_file == "relations.parquet" and config.optim.lr == 0.01


def test_bad_inputs_are_one_error_line(concept, store, tmp_path, capsys):
    args = ["retrain", "--dataset", str(concept), "--out", str(tmp_path / "new")]
    assert main([*args, "--from-labels", str(tmp_path / "missing.sqlite")]) == 2
    assert "no such file" in capsys.readouterr().err
    (tmp_path / "text.sqlite").write_text("not a database")
    assert main([*args, "--from-labels", str(tmp_path / "text.sqlite")]) == 2
    assert "not an annotation database" in capsys.readouterr().err
    assert main([*args, "--from-labels", str(store.path)]) == 2
    assert "no settled labels of dataset 'tiny' to train on (no labels at all)" in (
        capsys.readouterr().err)
    store.add(TINY, "asha", "v004-en", "v005-en", "negative")
    store.add(TINY, "ravi", "v004-en", "v005-en", "partial")
    assert main([*args, "--from-labels", str(store.path)]) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: no settled labels") and "1 pair(s) unsettled" in err
    store.add(TINY, "asha", "v000-en", "nowhere-en", "partial")
    assert main([*args, "--from-labels", str(store.path)]) == 2
    assert "name captions that" in capsys.readouterr().err
    assert not (tmp_path / "new").exists()


@pytest.mark.slow
def test_retrain_trains_po_manual_and_records_the_labels(concept, store, fast_args,
                                                          tmp_path, capsys):
    from rudder import train

    train.main(["--dataset", str(concept), "--output-dir", str(tmp_path / "runs" / "base"),
                *fast_args])
    label_pairs(store)
    out = tmp_path / "runs" / "retrained"
    code = main(["retrain", "--dataset", str(concept), "--from-labels", str(store.path),
                 "--base-run", str(tmp_path / "runs" / "base"), "--out", str(out),
                 "--epochs", "1"])
    assert code == 0
    printed = capsys.readouterr().out
    assert "3 settled labels of 'tiny' (1 single, 1 agreed, 1 majority; 1 pair(s) unsettled)" in (
        printed)
    record = json.loads((out / "manual_labels.json").read_text())
    assert record["labels"] == 3 and record["source"] == str(store.path.resolve())
    assert record["test"]["t2v"]["R10"] is not None
    config = yaml.safe_load((out / "config.yaml").read_text())
    assert config["loss"]["name"] == "po" and config["epochs"] == 1
    assert config["supervision"]["relations_file"] == "relations.parquet"
    assert pq.read_table(out / "relations.parquet").num_rows == 3
    assert {p.parent.parent.name for p in checkpoints_under(tmp_path / "runs")} == {
        "base", "retrained"}
    assert [p.name for p in (tmp_path / "runs").iterdir() if p.name.startswith(".")] == []


def test_the_labels_are_read_while_the_app_writes(store):
    store.add(TINY, "asha", "v000-en", "v001-en", "partial")
    with sqlite3.connect(store.path) as db:  # a writer holding the file open
        db.execute("BEGIN IMMEDIATE")
        assert len(read_app_labels(store.path, TINY)) == 1
        db.execute("ROLLBACK")
    with pytest.raises(RetrainError):
        read_app_labels(store.path.parent / "nothing.sqlite", TINY)
