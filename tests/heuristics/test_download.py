import json
import sys
import time
import types

import pytest

from heuristics.__main__ import main
from heuristics.download import DownloadError, download_models


def unreachable(host, timeout):
    raise OSError("Network is unreachable")


def reachable(host, timeout):
    return None


def test_offline_fails_fast_and_writes_nothing(tmp_path, monkeypatch):
    monkeypatch.setenv("HF_HUB_OFFLINE", "0")
    start = time.perf_counter()
    with pytest.raises(
        DownloadError, match=r"cannot reach raw.githubusercontent.com .*train-tagger"
    ):
        download_models(["mr"], tmp_path / "models", timeout=0.5, check=unreachable)
    assert time.perf_counter() - start < 2
    assert not (tmp_path / "models").exists()


def test_hf_hub_offline_is_honoured(tmp_path, monkeypatch):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    with pytest.raises(DownloadError, match="HF_HUB_OFFLINE is set"):
        download_models(["mr"], tmp_path / "models", check=reachable)


def test_cli_reports_the_error(tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    assert main(["download", "--lang", "mr", "--model-dir", str(tmp_path / "m")]) == 2
    assert "error: HF_HUB_OFFLINE is set" in capsys.readouterr().err
    assert main(["download", "--lang", "xx", "--model-dir", str(tmp_path / "m")]) == 2
    assert "unsupported language 'xx'" in capsys.readouterr().err


def fake_stanza(monkeypatch, fail_on=None):
    """Replace ``stanza.download`` with one that writes a model tree (or fails for one language)."""

    def download(lang, model_dir, processors, logging_level):
        from pathlib import Path

        if lang == fail_on:
            raise ConnectionError("connection reset")
        (Path(model_dir) / lang / "pos").mkdir(parents=True)
        (Path(model_dir) / lang / "pos" / "default.pt").write_bytes(b"model")
        (Path(model_dir) / "resources.json").write_text(json.dumps({lang: {}}))

    module = types.ModuleType("stanza")
    module.download = download
    monkeypatch.setitem(sys.modules, "stanza", module)


def test_models_move_into_place_only_when_all_arrived(tmp_path, monkeypatch):
    monkeypatch.setenv("HF_HUB_OFFLINE", "0")
    target = tmp_path / "models"
    target.mkdir()
    (target / "keep.txt").write_text("untouched")
    fake_stanza(monkeypatch, fail_on="hi")
    with pytest.raises(
        DownloadError, match=r"downloading Stanza's 'hi' models failed .*nothing was written"
    ):
        download_models(["mr", "hi"], target, check=reachable)
    assert sorted(p.name for p in target.iterdir()) == ["keep.txt"]
    fake_stanza(monkeypatch)
    download_models(["mr"], target, check=reachable)
    assert (target / "mr" / "pos" / "default.pt").read_bytes() == b"model"
    assert sorted(p.name for p in target.iterdir()) == ["keep.txt", "mr", "resources.json"]
