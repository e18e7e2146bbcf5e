"""Train a tiny Stanza tagger + lemmatizer, load it, tag with it and score it (~10-20 s)."""

import json
import os
import signal
import sqlite3
import subprocess
import sys

import pytest

from heuristics.__main__ import main
from heuristics.conllu import ConlluError
from heuristics.stanza_training import TrainOptions, prepare_treebank, train_tagger
from heuristics.taggers import StanzaTagger, TaggerError

TINY = TrainOptions(size="tiny", max_steps=30, batch_size=10, eval_interval=30, lemma_steps=5)


@pytest.fixture(scope="module")
def tiny_model(tiny_treebank, tmp_path_factory):
    out = tmp_path_factory.mktemp("models")
    info = train_tagger(
        "en", tiny_treebank / "train.conllu", tiny_treebank / "dev.conllu", out, TINY
    )
    return out, info


def test_prepare_treebank_uses_rudder_tokens(tiny_treebank):
    from heuristics.conllu import read_conllu

    (first, *_) = prepare_treebank(read_conllu(tiny_treebank / "train.conllu"), "en")
    # "cut the paper ." -> punctuation dropped (rudder's tokeniser drops it), tags kept
    assert [(w.form, w.lemma, w.upos, w.head) for w in first.words] == [
        ("cut", "cut", "VERB", 0),
        ("the", "the", "DET", 3),
        ("paper", "paper", "NOUN", 1),
    ]


def test_train_load_tag(tiny_model):
    out, info = tiny_model
    assert (
        info["train"]["sentences"] == 40 and info["train"]["words"] == 120
    )  # 3 words each after "." goes
    assert info["lemmatizer"] == "stanza"
    assert sorted(p.name for p in (out / "en").iterdir()) == [
        "lemma",
        "lemmas.txt",
        "pos",
        "rudder_tagger.json",
    ]
    assert json.loads((out / "resources.json").read_text()) == {}
    assert not list(out.glob(".en.*"))  # no staging folder left
    tagger = StanzaTagger(out)
    tagged = tagger.tag(["Cutting the cards!", "fold"], "en")
    assert [[w.text for w in words] for words in tagged] == [["cutting", "the", "cards"], ["fold"]]
    # the lemmatizer's dictionary holds every training pair, so seen words get their gold lemma
    assert [w.lemma for w in tagged[0]] == ["cut", "the", "card"]
    assert {w.upos for words in tagged for w in words} <= {"VERB", "DET", "NOUN"}
    assert tagger.model_id("en").startswith("stanza-own:")
    # the training lemmas: what counts as a word for the Indic lemma fallback
    assert {"cut", "card", "paper"} <= tagger.known_lemmas("en")
    assert tagger.known_lemmas("mr") == frozenset()


def test_eval_tagger_cli(tiny_model, tiny_treebank, tmp_path, capsys):
    out, _ = tiny_model
    report = tmp_path / "scores.json"
    assert (
        main(
            [
                "eval-tagger",
                "--conllu",
                str(tiny_treebank / "dev.conllu"),
                "--model",
                str(out),
                "--report",
                str(report),
            ]
        )
        == 0
    )
    scores = json.loads(report.read_text())
    assert scores["lang"] == "en" and scores["sentences"] == 10 and scores["words"] == 30
    assert scores["noun"]["gold"] == 10 and scores["verb"]["gold"] == 10
    assert "UPOS accuracy" in capsys.readouterr().out
    # the same through the language folder itself
    assert (
        main(
            [
                "eval-tagger",
                "--conllu",
                str(tiny_treebank / "dev.conllu"),
                "--model",
                str(out / "en"),
            ]
        )
        == 0
    )


def test_tag_cli(tiny_model, capsys):
    out, _ = tiny_model
    assert (
        main(["tag", "--lang", "en", "--model-dir", str(out), "--no-cache", "cut the paper"]) == 0
    )
    line = json.loads(capsys.readouterr().out.strip())
    assert [w[0] for w in line["words"]] == ["cut", "the", "paper"]


def test_train_errors(tiny_treebank, tmp_path, capsys):
    bad = tmp_path / "bad.conllu"
    bad.write_text("1\tcut\tcut\tVERB\t_\t_\t0\troot\t_\n\n", encoding="utf-8")
    with pytest.raises(ConlluError, match=r"bad.conllu:1: expected 10 tab-separated columns"):
        train_tagger("en", bad, tiny_treebank / "dev.conllu", tmp_path / "m", TINY)
    assert (
        main(
            [
                "train-tagger",
                "--lang",
                "xx",
                "--train",
                str(bad),
                "--dev",
                str(bad),
                "--out",
                str(tmp_path / "m"),
            ]
        )
        == 2
    )
    assert "unsupported language 'xx'" in capsys.readouterr().err
    assert not (tmp_path / "m" / "en").exists()


def test_a_treebank_without_upos_is_refused(tiny_treebank, tmp_path, capsys):
    """It trained a tagger that tags every word X, so label found no nouns or verbs."""
    lines = (tiny_treebank / "train.conllu").read_text(encoding="utf-8").splitlines()
    cells = [line.split("\t") for line in lines]
    no_upos = [c[:3] + ["_"] + c[4:] if len(c) == 10 else c for c in cells]
    train = tmp_path / "noupos.conllu"
    train.write_text("\n".join("\t".join(c) for c in no_upos) + "\n", encoding="utf-8")
    argv = ["train-tagger", "--lang", "en", "--train", str(train)]
    argv += ["--dev", str(tiny_treebank / "dev.conllu"), "--model-dir", str(tmp_path / "m")]
    assert main(argv) == 2
    assert f"error: {train}: no UPOS tags (column 4 is '_' on every word)" in (
        capsys.readouterr().err
    )
    assert not (tmp_path / "m" / "en").exists()


def test_eval_tagger_without_model(tmp_path, tiny_treebank, capsys):
    (tmp_path / "empty").mkdir()
    assert (
        main(
            [
                "eval-tagger",
                "--conllu",
                str(tiny_treebank / "dev.conllu"),
                "--model",
                str(tmp_path / "empty"),
            ]
        )
        == 2
    )
    assert "holds models for no language; pass --lang" in capsys.readouterr().err
    with pytest.raises(TaggerError, match="no Stanza POS/lemma model for 'en'"):
        StanzaTagger(tmp_path / "empty").tag(["cut"], "en")


def test_label_with_stanza(tiny_model, tmp_path, capsys):
    from rudder.data.layout import DatasetFolder

    from .conftest import CAPTIONS, build_dataset

    out, _ = tiny_model
    mixed = build_dataset(tmp_path / "mixed")  # has a Hindi caption; the model folder has only en
    before = {p: p.read_bytes() for p in mixed.rglob("*") if p.is_file()}
    args = [
        "label",
        "--dataset",
        str(mixed),
        "--model-dir",
        str(out),
        "--cache",
        str(tmp_path / "c.sqlite"),
    ]
    assert main(args) == 2
    err = capsys.readouterr().err
    assert "no Stanza POS/lemma model for 'hi'" in err and "label only --langs en" in err
    assert {p: p.read_bytes() for p in mixed.rglob("*") if p.is_file()} == before
    with sqlite3.connect(tmp_path / "c.sqlite") as db:  # checked before tagging anything
        assert db.execute("SELECT COUNT(*) FROM tags").fetchone() == (0,)
    # --langs en labels the English captions with the only model there is
    assert main([*args, "--langs", "en"]) == 0
    mixed_train = DatasetFolder(mixed).captions("train").to_pydict()
    assert [c is None for c in mixed_train["noun_classes"]] == [False, True, False, False]
    english = build_dataset(tmp_path / "en", [c for c in CAPTIONS if c[2] == "en"])
    args[2] = str(english)
    assert main(args) == 0
    train = DatasetFolder(english).captions("train").to_pydict()
    assert {"nouns", "verbs", "noun_classes", "verb_classes"} <= set(train)
    # no class files: every class is a singleton named after its lemma
    for lemmas, classes in zip(train["nouns"], train["noun_classes"], strict=True):
        assert classes == list(dict.fromkeys(f"noun:en:{lemma.split(':')[0]}" for lemma in lemmas))


TINY_FLAGS = ["--size", "tiny", "--max-steps", "30", "--batch-size", "10", "--eval-interval", "15"]


def test_cli_chain_shares_one_model_folder(tiny_treebank, tmp_path, monkeypatch, capfd):
    """train-tagger, eval-tagger and label with no folder flag all use $STANZA_RESOURCES_DIR."""
    from .conftest import CAPTIONS, build_dataset

    monkeypatch.setenv("STANZA_RESOURCES_DIR", str(tmp_path / "models"))
    train, dev = str(tiny_treebank / "train.conllu"), str(tiny_treebank / "dev.conllu")
    args = ["train-tagger", "--lang", "en", "--train", train, "--dev", dev, *TINY_FLAGS]
    assert main([*args, "--lemma-steps", "5"]) == 0
    captured = capfd.readouterr()
    assert f"into {tmp_path / 'models' / 'en'}" in captured.out
    # progress: Stanza's step/loss and dev-score lines, and nothing else of its log
    assert "step 15: train_loss = " in captured.err and "step 30: train_loss = " in captured.err
    assert "not a known dataset" not in captured.err and "Dev F1 = " in captured.err
    assert main(["eval-tagger", "--conllu", dev]) == 0
    assert "en: 10 sentences, 30 words" in capfd.readouterr().out
    dataset = build_dataset(tmp_path / "d", [c for c in CAPTIONS if c[2] == "en"])
    assert main(["label", "--dataset", str(dataset), "--no-cache", "--dry-run"]) == 0
    assert "| test | partial |" in capfd.readouterr().out
    assert sorted(p.name for p in (tmp_path / "models").iterdir()) == ["en", "resources.json"]


@pytest.mark.slow
@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGKILL])
def test_killed_training_leaves_nothing(tiny_treebank, tmp_path, sig):
    out = tmp_path / "models"
    train, dev = str(tiny_treebank / "train.conllu"), str(tiny_treebank / "dev.conllu")
    command = [sys.executable, "-m", "heuristics", "train-tagger", "--lang", "en"]
    command += ["--train", train, "--dev", dev, "--model-dir", str(out), *TINY_FLAGS[:2]]
    command += ["--max-steps", "100000", "--eval-interval", "100000"]
    env = {**os.environ, "PYTHONPATH": os.getcwd()}
    process = subprocess.Popen(command, env=env, stderr=subprocess.PIPE, text=True)
    for line in process.stderr:  # wait until Stanza is training
        if "Finished STEP" in line:
            break
    assert [p.name.split(".staging-")[0] for p in out.iterdir()] == [".en"]
    process.send_signal(sig)
    process.stderr.read()
    assert process.wait(timeout=60) != 0
    if sig == signal.SIGKILL:  # cannot be caught: the next start removes the leftover
        assert len(list(out.iterdir())) == 1
        train_tagger("en", train, dev, out, TINY, progress=False)
    assert sorted(p.name for p in out.iterdir()) == (
        ["en", "resources.json"] if sig == signal.SIGKILL else []
    )
