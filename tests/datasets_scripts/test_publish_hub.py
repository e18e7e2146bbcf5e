import http.server
import socket
import threading
import time

import pytest

import datasets_scripts.publish as publish_module
from datasets_scripts.__main__ import main
from datasets_scripts.publish import PublishError, publish


@pytest.fixture
def dataset(tmp_path, build):
    src = tmp_path / "src"
    src.mkdir()
    (src / "charades_sta_test.txt").write_text(
        "A1 0.0 4.0##a person cooks.\nB2 1.0 3.0##someone sits.\n"
    )
    code, out = build("charades_sta", src)
    assert code == 0
    return out


@pytest.fixture
def hub_online(monkeypatch):
    """huggingface_hub out of offline mode (tests/conftest.py turns it on)."""
    from huggingface_hub import constants

    monkeypatch.setenv("HF_HUB_OFFLINE", "0")
    monkeypatch.setattr(constants, "HF_HUB_OFFLINE", False)


@pytest.fixture
def online(monkeypatch, tmp_path, hub_online):
    """No offline flag, no token anywhere, the network check replaced."""
    from huggingface_hub import constants

    for name in ("HF_TOKEN", "HUGGING_FACE_HUB_TOKEN", "HF_OIDC_RESOURCE"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setattr(constants, "HF_TOKEN_PATH", str(tmp_path / "no-token"))
    monkeypatch.setattr(publish_module, "check_reachable", lambda endpoint, timeout: None)


def test_dry_run_lists_files_and_validates(dataset, capsys):
    assert main(["publish", str(dataset), "--repo-id", "me/charades", "--dry-run"]) == 0
    out = capsys.readouterr().out
    size = (dataset / "captions" / "test.parquet").stat().st_size
    assert f"{size:>14,d}  captions/test.parquet" in out
    assert "README.md" in out and "rudder.json" in out
    assert "4 files" in out and "card OK (2 configs: captions, videos)" in out


def test_card_problems_are_named(dataset):
    (dataset / "videos" / "test.parquet").rename(dataset / "videos" / "moved.parquet")
    with pytest.raises(PublishError, match=r"config 'videos' lists 'videos/test.parquet'"):
        publish(dataset, "me/x", dry_run=True)
    (dataset / "videos" / "moved.parquet").rename(dataset / "videos" / "test.parquet")
    (dataset / "videos" / "extra.parquet").write_bytes(b"x")
    with pytest.raises(PublishError, match=r"no config lists: \['videos/extra.parquet'\]"):
        publish(dataset, "me/x", dry_run=True)
    (dataset / "videos" / "extra.parquet").unlink()
    card = dataset / "README.md"
    card.write_text(card.read_text().replace("configs:", "configs: [", 1))
    with pytest.raises(PublishError, match="front matter does not parse"):
        publish(dataset, "me/x", dry_run=True)
    with pytest.raises(PublishError, match="use USER/NAME"):
        publish(dataset, "no-slash", dry_run=True)


def test_card_data_files_forms(dataset):
    """A config without files is refused; a list of paths or a glob is what the Hub accepts."""
    card = dataset / "README.md"
    text = card.read_text()
    videos = "  - split: test\n    path: videos/test.parquet\n"
    assert videos in text
    card.write_text(text.replace(videos, "  - split: test\n    path: [videos/test.parquet]\n"))
    assert publish_module.validate_card(dataset) == ["captions", "videos"]
    card.write_text(text.replace(videos, "  - split: test\n    path: videos/*.parquet\n"))
    assert publish_module.validate_card(dataset) == ["captions", "videos"]
    card.write_text(text.replace("  data_files:\n" + videos, "  data_files: []\n"))
    with pytest.raises(PublishError, match="config 'videos' has no data_files"):
        publish(dataset, "me/x", dry_run=True)
    for outside in (dataset / "videos" / "test.parquet", "../videos/test.parquet"):
        card.write_text(text.replace(videos, f"  - split: test\n    path: {outside}\n"))
        with pytest.raises(PublishError, match="paths are relative to the folder, inside it"):
            publish(dataset, "me/x", dry_run=True)


def test_card_metadata(dataset):
    """A licence 'other' is named (license_name) and spelled out under Licence; a dataset in
    one language is not tagged multilingual."""
    front = publish_module.card_front_matter(dataset)
    assert (front["license"], front["license_name"]) == ("other", "charades-sta-terms")
    assert front["language"] == ["en"] and "multilingual" not in front["tags"]
    licence = (dataset / "README.md").read_text().split("## Licence")[1]
    assert "Charades: non-commercial research use" in licence


def test_upload_calls_the_hub_client(dataset, online, monkeypatch, capsys):
    from huggingface_hub import HfApi

    calls = []

    def create_repo(self, repo_id, **kwargs):
        calls.append(("create_repo", repo_id, kwargs))
        return f"https://huggingface.co/datasets/{repo_id}"

    def upload_folder(self, **kwargs):
        calls.append(("upload_folder", kwargs["repo_id"], kwargs))

    monkeypatch.setattr(HfApi, "create_repo", create_repo)
    monkeypatch.setattr(HfApi, "upload_folder", upload_folder)
    monkeypatch.setenv("HF_TOKEN", "hf_test_token")
    assert main(["publish", str(dataset), "--repo-id", "me/charades", "--private"]) == 0
    (name1, repo1, create), (name2, repo2, upload) = calls
    assert (name1, repo1, name2, repo2) == (
        "create_repo",
        "me/charades",
        "upload_folder",
        "me/charades",
    )
    assert create == {
        "repo_type": "dataset",
        "private": True,
        "exist_ok": True,
        "token": "hf_test_token",
    }
    assert upload["folder_path"] == str(dataset) and upload["repo_type"] == "dataset"
    assert upload["token"] == "hf_test_token" and ".*" in upload["ignore_patterns"]
    assert "uploaded 4 files" in capsys.readouterr().out


def test_missing_token(dataset, online, capsys):
    assert main(["publish", str(dataset), "--repo-id", "me/charades"]) == 2
    assert "no Hugging Face token: set HF_TOKEN" in capsys.readouterr().err


def test_offline_flag(dataset, monkeypatch):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    with pytest.raises(PublishError, match="HF_HUB_OFFLINE is set"):
        publish(dataset, "me/charades", token="hf_x")


def test_unreachable_endpoint_fails_fast():
    started = time.monotonic()
    with pytest.raises(PublishError, match="cannot reach http://127.0.0.1:9"):
        publish_module.check_reachable("http://127.0.0.1:9", timeout=3)
    assert time.monotonic() - started < 5


@pytest.fixture(params=["silent", "close"])
def stuck_endpoint(request):
    """A local endpoint that accepts connections, then never answers ("silent": a stuck
    proxy or captive portal) or closes them without a word ("close")."""
    server = socket.create_server(("127.0.0.1", 0))
    held = []

    def serve():
        while True:
            try:
                connection, _ = server.accept()
            except OSError:  # the server socket was closed
                return
            if request.param == "close":
                connection.close()
            else:
                held.append(connection)

    threading.Thread(target=serve, daemon=True).start()
    yield f"http://127.0.0.1:{server.getsockname()[1]}"
    server.close()
    for connection in held:
        connection.close()


def test_check_reachable_needs_an_answer(stuck_endpoint, hub_online):
    started = time.monotonic()
    with pytest.raises(PublishError, match=f"cannot reach {stuck_endpoint}"):
        publish_module.check_reachable(stuck_endpoint, timeout=1)
    assert time.monotonic() - started < 3


def test_hub_calls_time_out_with_a_clear_error(dataset, online, stuck_endpoint, monkeypatch):
    """create_repo/upload_folder on a connection that hangs or drops: a PublishError that
    names the endpoint and says a rerun resumes, within the timeouts (no raw traceback)."""
    from huggingface_hub import constants

    monkeypatch.setattr(constants, "ENDPOINT", stuck_endpoint)
    started = time.monotonic()
    expected = f"lost the connection to {stuck_endpoint} .* rerun the command: it resumes"
    with pytest.raises(PublishError, match=expected):
        publish(dataset, "me/x", token="hf_x", timeout=1, transfer_timeout=1)
    assert time.monotonic() - started < 15  # without timeouts: forever


class _Proxy(http.server.BaseHTTPRequestHandler):
    """A forward proxy that answers every request itself."""

    def do_HEAD(self):
        self.send_response(200)
        self.end_headers()

    def log_message(self, *args):
        pass


@pytest.fixture
def proxy(monkeypatch, hub_online):
    from huggingface_hub import close_session

    server = http.server.HTTPServer(("127.0.0.1", 0), _Proxy)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    for name in ("NO_PROXY", "no_proxy", "ALL_PROXY", "all_proxy"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("HTTP_PROXY", f"http://127.0.0.1:{server.server_port}")
    close_session()  # the Hub's session reads the proxy settings when it is made
    yield
    close_session()
    server.shutdown()
    server.server_close()


def test_check_reachable_goes_through_the_proxy(proxy):
    """A host only the proxy can reach passes the check (a direct connection cannot)."""
    publish_module.check_reachable("http://hub.example.invalid", timeout=2)


def test_dry_run_reads_every_file_against_the_card(dataset, tmp_path, capsys):
    """A truncated parquet file, or one with other rows than the card states, is no 'card OK'
   ."""
    import pyarrow.parquet as pq

    path = dataset / "captions" / "test.parquet"
    whole = path.read_bytes()
    path.write_bytes(whole[: len(whole) // 2])
    assert main(["publish", str(dataset), "--repo-id", "me/x", "--dry-run"]) == 2
    err = capsys.readouterr().err
    assert f"{path}: not a readable parquet file" in err and "truncated" in err
    path.write_bytes(whole)
    table = pq.read_table(path)
    pq.write_table(table.slice(0, 1), path)
    with pytest.raises(PublishError, match=r"test.parquet: holds 1 rows, but the card says 2"):
        publish(dataset, "me/x", dry_run=True)
    pq.write_table(table, path)
    assert main(["publish", str(dataset), "--repo-id", "me/x", "--dry-run"]) == 0
    assert "card OK" in capsys.readouterr().out


def test_dry_run_refuses_splits_that_disagree(tmp_path, build, capsys):
    """A folder labelled on one split only (an interrupted label of an older rudder) is not
    'card OK'."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    src = tmp_path / "src2"
    src.mkdir()
    (src / "charades_sta_train.txt").write_text("A1 0.0 4.0##a person cooks.\n")
    (src / "charades_sta_test.txt").write_text("B2 1.0 3.0##someone sits.\n")
    code, out = build("charades_sta", src, out=tmp_path / "mixed")
    assert code == 0
    path = out / "captions" / "train.parquet"
    table = pq.read_table(path)
    none = pa.array([None] * table.num_rows, pa.list_(pa.string()))
    for column in ("nouns", "verbs", "noun_classes", "verb_classes"):
        table = table.append_column(column, none)
    pq.write_table(table, path)
    with pytest.raises(Exception, match=r"caption splits disagree .* --overwrite"):
        publish(out, "me/x", dry_run=True)
