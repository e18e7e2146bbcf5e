import json
import sys
import time
import types

import pytest

from heuristics.__main__ import main
from heuristics.download import DownloadError, download_models, probe, sources


def unreachable(host, timeout):
    raise OSError("Network is unreachable")


def reachable(host, timeout):
    return None


def test_offline_fails_fast_and_writes_nothing(tmp_path, monkeypatch):
    monkeypatch.setenv("HF_HUB_OFFLINE", "0")
    start = time.perf_counter()
    with pytest.raises(
        DownloadError, match=r"cannot reach https://raw.githubusercontent.com/ .*train-tagger"
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


@pytest.mark.parametrize("value", ["", "0", "false", "FALSE", "off", "No"])
def test_hf_hub_offline_false_values_download(tmp_path, monkeypatch, value):
    """huggingface_hub reads only 1/on/yes/true (any case) as offline; 'off' was read as set."""
    monkeypatch.setenv("HF_HUB_OFFLINE", value)
    fake_stanza(monkeypatch)
    assert download_models(["mr"], tmp_path / "models", check=reachable) == ["mr"]


@pytest.mark.parametrize("value", ["1", "on", "YES", "True"])
def test_hf_hub_offline_true_values_refuse(tmp_path, monkeypatch, value):
    monkeypatch.setenv("HF_HUB_OFFLINE", value)
    with pytest.raises(DownloadError, match="HF_HUB_OFFLINE is set"):
        download_models(["mr"], tmp_path / "models", check=reachable)


def test_the_probe_follows_stanzas_mirror_settings(tmp_path, monkeypatch):
    """A mirror (STANZA_RESOURCES_URL, HF_ENDPOINT or STANZA_MODEL_URL) is probed instead of
    the public hosts, which were probed (and refused) whatever the settings."""
    monkeypatch.setenv("HF_HUB_OFFLINE", "0")
    monkeypatch.delenv("STANZA_MODEL_URL", raising=False)
    monkeypatch.delenv("HF_ENDPOINT", raising=False)
    monkeypatch.delenv("STANZA_RESOURCES_URL", raising=False)
    assert sources() == ["https://raw.githubusercontent.com/", "https://huggingface.co/"]
    monkeypatch.setenv("STANZA_RESOURCES_URL", "http://mirror.lan:8000/stanza-resources/main")
    monkeypatch.setenv("HF_ENDPOINT", "https://hf-mirror.lan")
    probed = []
    fake_stanza(monkeypatch)
    download_models(["mr"], tmp_path / "models", check=lambda url, t: probed.append(url))
    assert probed == ["http://mirror.lan:8000/", "https://hf-mirror.lan/"]
    monkeypatch.setenv("STANZA_MODEL_URL", "http://mirror.lan:8000/{lang}/{filename}")
    assert sources() == ["http://mirror.lan:8000/"]


@pytest.fixture
def web_server():
    """A local HTTP server answering every request; yields its address."""
    import http.server
    import threading

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), http.server.SimpleHTTPRequestHandler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}"
    server.shutdown()
    server.server_close()


def test_the_probe_is_an_http_request_through_the_proxy(web_server, monkeypatch):
    for name in ("NO_PROXY", "no_proxy", "HTTPS_PROXY", "https_proxy"):
        monkeypatch.delenv(name, raising=False)
    probe(web_server + "/", 2.0)
    monkeypatch.setenv("HTTPS_PROXY", "http://127.0.0.1:9")  # nothing listens there
    with pytest.raises(OSError, match="(?i)proxy"):
        probe("https://huggingface.co/", 2.0)


def test_a_mirror_that_answers_passes_the_probe(web_server, tmp_path, monkeypatch):
    monkeypatch.setenv("HF_HUB_OFFLINE", "0")
    monkeypatch.setenv("STANZA_RESOURCES_URL", web_server + "/resources")
    monkeypatch.setenv("HF_ENDPOINT", web_server)
    monkeypatch.delenv("STANZA_MODEL_URL", raising=False)
    fake_stanza(monkeypatch)
    assert download_models(["mr"], tmp_path / "models") == ["mr"]


def test_models_trained_by_train_tagger_are_replaced_only_with_overwrite(
    tmp_path, monkeypatch, capsys
):
    monkeypatch.setenv("HF_HUB_OFFLINE", "0")
    trained = tmp_path / "models" / "mr"
    (trained / "pos").mkdir(parents=True)
    (trained / "rudder_tagger.json").write_text("{}")
    fake_stanza(monkeypatch)
    with pytest.raises(DownloadError, match=r"trained by train-tagger for mr.*--overwrite"):
        download_models(["mr"], tmp_path / "models", check=reachable)
    assert sorted(p.name for p in trained.iterdir()) == ["pos", "rudder_tagger.json"]
    download_models(["mr"], tmp_path / "models", check=reachable, overwrite=True)
    assert sorted(p.name for p in trained.iterdir()) == ["pos"]
