"""Checkpoints are read with weights_only=True: a crafted pickle is refused by every reader,
and damaged files are reported by name."""

import json
import os
import re
import shutil
from pathlib import Path

import numpy as np
import pytest
import torch

from rudder import train
from rudder.errors import RunError
from rudder.evaluation import evaluate
from rudder.evaluation.loading import load_run
from rudder.runs.checkpoints import (
    CHECKPOINT_VERSION,
    load_checkpoint,
    restore_generator,
    restore_scaler,
)

REPO = Path(__file__).resolve().parents[2]


class WritesMarker:
    """Unpickling this runs code: it writes ``path`` (what a malicious checkpoint would do)."""

    def __init__(self, path):
        self.path = str(path)

    def __reduce__(self):
        return (exec, (f"open({self.path!r}, 'w').write('pwned')",))


REFUSED = "holds objects that are not tensors or plain values: refused for safety"


class RunsSystem:
    """A payload calling a function of a module torch blocks outright (os.system)."""

    def __reduce__(self):
        return (os.system, ("true",))


class Custom:
    """An object of a class that is not a tensor or plain value."""


@pytest.mark.parametrize("payload", [WritesMarker("/nonexistent/x"), RunsSystem(), Custom()],
                         ids=["builtin-exec", "blocked-module", "custom-class"])
def test_each_kind_of_payload_is_refused_for_safety(tmp_path, payload):
    """On the installed torch (2.13 words a blocked module's refusal differently)."""
    from rudder.runs.checkpoints import read_plain

    path = tmp_path / "x.pt"
    torch.save({"version": CHECKPOINT_VERSION, "model": payload}, path)
    with pytest.raises(RunError, match=rf"{path}: {REFUSED}") as info:
        read_plain(path)
    assert "truncated" not in str(info.value)


def craft(path: Path, marker: Path) -> None:
    torch.save({"version": CHECKPOINT_VERSION, "model": WritesMarker(marker)}, path)


@pytest.fixture(scope="module")
def trained(tmp_path_factory, tiny_dataset):
    """A finished 1-epoch run to copy (each test damages its own copy)."""
    out = tmp_path_factory.mktemp("trained") / "run"
    train.main(["--dataset", str(tiny_dataset), "--output-dir", str(out), "--epochs", "1",
                "--set", "data.batch_size=8", "--set", "model.shared_dim=16",
                "--set", "model.word_dim=8",
                "--set", "data.caption_langs=[mr, en]", "--set", "data.audio_langs=[mr]"])
    return out


@pytest.fixture
def run_copy(trained, tmp_path):
    shutil.copytree(trained, tmp_path / "runs" / "run")
    return tmp_path / "runs" / "run"


def one_error_line(capsys) -> str:
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("error: "), err
    return err[0]


def test_a_crafted_checkpoint_is_refused_by_every_reader(run_copy, tiny_dataset, tmp_path, capsys):
    import app.__main__ as app_cli
    from rudder.search.index import SearchIndexError, VideoIndex

    marker = tmp_path / "marker"
    best, last = run_copy / "checkpoints" / "best.pt", run_copy / "checkpoints" / "last.pt"
    craft(best, marker)

    with pytest.raises(RunError, match=rf"{best}: {REFUSED}.*exec"):
        load_run(run_copy)
    with pytest.raises(SystemExit) as exit_info:  # rudder.evaluate
        evaluate.main([str(run_copy)])
    line = one_error_line(capsys)
    assert exit_info.value.code == 2 and str(best) in line and "refused for safety" in line
    with pytest.raises(SystemExit) as exit_info:  # python -m app finds the newest run by itself
        app_cli.main(["--runs", str(run_copy.parent), "--dataset", str(tiny_dataset)])
    assert exit_info.value.code == 2 and str(best) in one_error_line(capsys)
    # Resuming: best.pt is read for the test metrics once no epoch is left to train ...
    with pytest.raises(SystemExit) as exit_info:
        train.main(["--output-dir", str(run_copy), "--resume"])
    assert exit_info.value.code == 2 and str(best) in one_error_line(capsys)
    # ... and last.pt to continue.
    craft(last, marker)
    with pytest.raises(SystemExit) as exit_info:
        train.main(["--output-dir", str(run_copy), "--resume", "--epochs", "2"])
    assert exit_info.value.code == 2 and str(last) in one_error_line(capsys)
    index = tmp_path / "index.pt"
    torch.save({"version": 1, "video_ids": WritesMarker(marker)}, index)
    with pytest.raises(SearchIndexError, match=rf"{index}: {REFUSED}"):
        VideoIndex.load(index)
    assert not marker.exists()


def test_every_torch_load_goes_through_the_safe_reader():
    calls = [(str(path.relative_to(REPO)), line.strip()) for path in REPO.glob("[!.]*/**/*.py")
             if "tests" not in path.parts for line in path.read_text(encoding="utf-8").splitlines()
             if re.search(r"(?<!`)torch\.load\(", line)]
    assert [file for file, _ in calls] == ["rudder/runs/checkpoints.py"], calls
    assert "weights_only=True" in calls[0][1]


def test_checkpoints_hold_only_tensors_and_plain_values(trained):
    def leaves(value):
        if isinstance(value, dict):
            assert all(isinstance(k, (str, int)) for k in value)
            return [leaf for v in value.values() for leaf in leaves(v)]
        if isinstance(value, (list, tuple)):
            return [leaf for v in value for leaf in leaves(v)]
        return [value]

    state = torch.load(trained / "checkpoints" / "last.pt", weights_only=True)
    kinds = {type(leaf) for leaf in leaves(state)}
    assert kinds <= {torch.Tensor, int, float, str, bool, type(None)}, kinds
    assert state["version"] == CHECKPOINT_VERSION == 2


@pytest.mark.parametrize("damage", ["truncated", "empty", "garbage"])
def test_a_damaged_checkpoint_is_named(run_copy, capsys, damage):
    best = run_copy / "checkpoints" / "best.pt"
    data = best.read_bytes()
    best.write_bytes({"truncated": data[: len(data) // 2], "empty": b"",
                      "garbage": b"not a checkpoint"}[damage])
    with pytest.raises(RunError, match=rf"{best}: cannot be read, it is truncated or corrupt"):
        load_checkpoint(best)
    with pytest.raises(SystemExit) as exit_info:
        evaluate.main([str(run_copy)])
    assert exit_info.value.code == 2 and "truncated or corrupt" in one_error_line(capsys)


def test_an_old_checkpoint_version_is_refused(run_copy):
    best = run_copy / "checkpoints" / "best.pt"
    state = torch.load(best, weights_only=True)
    torch.save({**state, "version": 1}, best)
    with pytest.raises(RunError, match=rf"{best}: checkpoint version 1 is not supported "
                       r".*train the run again"):
        load_run(run_copy)


def test_a_torn_metrics_line_is_dropped_on_resume(run_copy):
    metrics = run_copy / "metrics.jsonl"
    with open(metrics, "a", encoding="utf-8") as handle:
        handle.write('{"epoch": 2, "split": "valid')  # the run stopped while writing epoch 2
    train.main(["--output-dir", str(run_copy), "--resume", "--epochs", "2"])
    assert [json.loads(line)["epoch"] for line in metrics.read_text().splitlines()] == [1, 2]


def test_a_run_resumes_on_another_device_type(run_copy):
    """A CUDA run's loss generator saved its 16-byte (seed, offset) state, which a CPU
    generator cannot take: the resume goes on from a seed and says so."""
    last = run_copy / "checkpoints" / "last.pt"
    state = torch.load(last, weights_only=True)
    state["rng"]["loss"] = torch.zeros(16, dtype=torch.uint8)  # what Generator("cuda") saves
    torch.save(state, last)
    result = train.main(["--output-dir", str(run_copy), "--resume", "--epochs", "2"])
    assert result["epochs_run"] == 2
    assert "resumed on another device type" in (run_copy / "train.log").read_text()


def test_restore_generator_and_scaler_across_devices():
    generator = torch.Generator().manual_seed(3)
    saved = generator.get_state()
    expected = torch.rand(2, generator=generator)
    restore_generator(generator, saved, seed=9)
    assert torch.equal(torch.rand(2, generator=generator), expected)  # same device: exact
    restore_generator(generator, torch.zeros(16, dtype=torch.uint8), seed=9)
    assert torch.equal(torch.rand(2, generator=generator),
                       torch.rand(2, generator=torch.Generator().manual_seed(9)))
    disabled = torch.amp.GradScaler("cpu", enabled=False).state_dict()
    scaler = torch.amp.GradScaler("cpu", enabled=True, init_scale=64.0)
    restore_scaler(scaler, disabled)  # a run without AMP resumed with it
    assert scaler.get_scale() == 64.0
    trained = torch.amp.GradScaler("cpu", enabled=True, init_scale=8.0).state_dict()
    restore_scaler(scaler, trained)
    assert scaler.get_scale() == 8.0
    restore_scaler(torch.amp.GradScaler("cpu", enabled=False), trained)  # AMP run, now without


def test_a_broken_metrics_line_is_named(run_copy, capsys):
    metrics = run_copy / "metrics.jsonl"
    metrics.write_text("garbage\n" + metrics.read_text())
    with pytest.raises(SystemExit) as exit_info:
        train.main(["--output-dir", str(run_copy), "--resume", "--epochs", "2"])
    assert exit_info.value.code == 2 and (f"{metrics}:1: not an evaluation record"
                                          in one_error_line(capsys))


def test_predictions_are_written_atomically(run_copy, monkeypatch):
    out = run_copy / "evaluations" / "test-single"
    evaluate.main([str(run_copy)])
    before = (out / "predictions.npz").read_bytes()

    def fails_halfway(file, **arrays):
        with open(file, "wb") if isinstance(file, (str, Path)) else file as handle:
            handle.write(b"PK half a file")
        raise OSError("disk full")

    monkeypatch.setattr(np, "savez_compressed", fails_halfway)
    with pytest.raises(OSError, match="disk full"):
        evaluate.main([str(run_copy)])
    assert (out / "predictions.npz").read_bytes() == before
    assert sorted(p.name for p in out.iterdir()) == ["metrics.json", "predictions.npz"]


def test_a_checkpoint_with_an_invalid_config_is_named(run_copy):
    best = run_copy / "checkpoints" / "best.pt"
    state = torch.load(best, weights_only=True)
    torch.save({**state, "config": {**state["config"], "epochs": "many"}}, best)
    with pytest.raises(RunError,
                       match=rf"{best}: its config is not valid \(epochs='many' is not valid"):
        load_run(run_copy)


def test_best_is_a_second_name_that_keeps_its_bytes(tmp_path):
    from rudder.runs.checkpoints import link_or_copy

    last, best = tmp_path / "last.pt", tmp_path / "best.pt"
    last.write_bytes(b"epoch 3")
    link_or_copy(last, best)
    assert best.read_bytes() == b"epoch 3"
    replacement = tmp_path / "new"
    replacement.write_bytes(b"epoch 4")
    os.replace(replacement, last)  # how atomic_torch_save writes the next last.pt
    assert best.read_bytes() == b"epoch 3" and last.read_bytes() == b"epoch 4"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["best.pt", "last.pt"]
