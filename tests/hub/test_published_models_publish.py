"""``python -m rudder.publish``: staging, the model card, --dry-run, refusals, and the upload
through huggingface_hub's HfApi (replaced by a recorder at that boundary only)."""

import json
import shutil
from typing import ClassVar

import pytest
import yaml

from rudder.evaluation import evaluate
from rudder.hub import model_card, publish, published_models
from rudder.runs.layout import metrics_file

from ..factories import concept_dataset
from .test_published_models import FAST, SHA, fake_cache, hf_cache  # noqa: F401 -- a fixture


@pytest.fixture(scope="module")
def run(tmp_path_factory):
    from rudder import train

    root = tmp_path_factory.mktemp("publish")
    dataset = concept_dataset(root / "data")
    train.main(["--dataset", str(dataset), "--output-dir", str(root / "run"), *FAST,
                "--loss", "triplet", "--set", "loss.params.margin=0.3"])
    return root / "run"


def front(folder) -> dict:
    card = (folder / published_models.CARD).read_text(encoding="utf-8")
    return model_card.card_front_matter(card)


def test_dry_run_lists_the_files_offline_and_uploads_nothing(run, tmp_path, monkeypatch, capsys):
    import huggingface_hub

    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setattr(huggingface_hub, "HfApi", None)  # any use would fail
    files = publish.main([str(run), "--repo-id", "me/tiny", "--dry-run", "--license", "mit"])
    out = capsys.readouterr().out
    assert [name for name, _ in files] == list(published_models.MODEL_FILES)
    for name, size in files:
        assert f"{size:>14,d}  {name}" in out
    assert "would upload to models/me/tiny" in out and "model rebuilt from them" in out


def test_the_card_declares_data_text_side_metrics_loss_commit_and_citations(run, tmp_path):
    publish.main([str(run), "--repo-id", "me/tiny", "--dry-run", "--license", "cc-by-4.0",
                  "--stage", str(tmp_path / "s")])
    card, env = front(tmp_path / "s"), json.loads((run / "env.json").read_text())
    assert card["library_name"] == "rudder" and card["license"] == "cc-by-4.0"
    assert card["language"] == ["mr", "en"]
    meta = card["rudder"]
    assert meta["dataset"]["fingerprint"] == env["dataset_fingerprint"]
    assert meta["experts"] == {"audio@mr": {"dim": 8, "variable_length": True},
                               "object": {"dim": 16, "variable_length": False}}
    assert meta["loss"] == {"name": "triplet", "params": {"margin": 0.3}}
    assert meta["training_commit"] == env["git_sha"] and meta["text_side"]["text_encoder"] is None
    assert meta["text_side"]["vocabulary_size"] == len(
        json.loads((tmp_path / "s" / published_models.TEXT_SIDE).read_text())
        ["vocabulary"]["tokens"])
    results = card["model-index"][0]["results"]
    assert [r["dataset"]["split"] for r in results] == ["test", "test"]
    t2v = {m["name"]: m["value"] for m in results[0]["metrics"]}
    saved = json.loads(metrics_file(run).read_text())["test"]["t2v"]
    assert t2v["t2v R@5"] == round(saved["R5"], 4) and "tie-averaged" in meta["protocol"]
    body = (tmp_path / "s" / published_models.CARD).read_text(encoding="utf-8")
    assert "@article{akula2021rudder" in body and "@inproceedings{liu2019use" in body
    assert "FaceNet" in body  # the triplet loss's paper
    assert "python -m rudder.evaluate hf://me/tiny" in body


def test_the_licence_defaults_to_the_training_datasets(run, tmp_path, capsys):
    import torch

    publish.main([str(run), "--repo-id", "me/tiny", "--dry-run", "--stage", str(tmp_path / "s")])
    assert front(tmp_path / "s")["license"] == "other"  # the tiny dataset card's
    away = tmp_path / "run"  # a run whose dataset is not on this machine
    shutil.copytree(run, away)
    for checkpoint in (away / "checkpoints").glob("*.pt"):
        state = torch.load(checkpoint, weights_only=True)
        state["config"]["data"]["dataset"] = str(tmp_path / "gone")
        torch.save(state, checkpoint)
    with pytest.raises(SystemExit):
        publish.main([str(away), "--repo-id", "me/tiny", "--dry-run"])
    assert "pass --license" in capsys.readouterr().err


@pytest.mark.parametrize("case, message", [
    ("bad-id", "--repo-id 'me' : use USER/NAME"),
    ("seeds", "is not one training run"),
    ("unfinished", "has no finished training"),
    ("stale", "describes epoch 99 but"),
    ("stage", "exists and is not an empty folder"),
    ("offline", "HF_HUB_OFFLINE is set"),
])
def test_refusals_are_one_error_line(run, tmp_path, monkeypatch, capsys, case, message):
    target, extra, repo = tmp_path / "run", ["--dry-run", "--license", "mit"], "me/tiny"
    shutil.copytree(run, target)
    if case == "bad-id":
        repo, message = "me", "--repo-id 'me': use USER/NAME"
    elif case == "seeds":
        target = tmp_path
    elif case == "unfinished":
        metrics_file(target).unlink()
    elif case == "stale":
        summary = json.loads(metrics_file(target).read_text())
        metrics_file(target).write_text(json.dumps({**summary, "best_epoch": 99}))
    elif case == "stage":
        (tmp_path / "full").mkdir()
        (tmp_path / "full" / "x").write_text("x")
        extra += ["--stage", str(tmp_path / "full")]
    elif case == "offline":
        monkeypatch.setenv("HF_HUB_OFFLINE", "1")
        extra = []
    with pytest.raises(SystemExit) as stop:
        publish.main([str(target), "--repo-id", repo, *extra])
    err = capsys.readouterr().err
    assert stop.value.code == 2 and err.startswith("error: ") and err.count("\n") == 1
    assert message in err


class FakeApi:
    """Records what publish asks of huggingface_hub.HfApi."""

    calls: ClassVar[list] = []
    fail_on: ClassVar[str | None] = None
    refuse_on: ClassVar[str | None] = None

    def __init__(self, endpoint=None, token=None):
        self.calls.append(("init", {"token": token}))

    def _record(self, name, **kwargs):
        self.calls.append((name, kwargs))
        if name == self.fail_on:
            import httpx2

            raise httpx2.ConnectError("[Errno 111] Connection refused")
        if name == self.refuse_on:
            import httpx2
            from huggingface_hub.errors import HfHubHTTPError

            request = httpx2.Request("POST", "https://huggingface.co/api/repos/create")
            raise HfHubHTTPError("403 Forbidden: you cannot create repos in namespace other",
                                 response=httpx2.Response(403, request=request))

    def whoami(self):
        self._record("whoami")
        return {"name": "me"}

    def create_repo(self, repo_id, **kwargs):
        self._record("create_repo", repo_id=repo_id, **kwargs)
        return f"https://huggingface.co/{repo_id}"

    def create_branch(self, repo_id, **kwargs):
        self._record("create_branch", repo_id=repo_id, **kwargs)

    def upload_folder(self, **kwargs):
        from pathlib import Path

        kwargs["files"] = sorted(p.name for p in Path(kwargs["folder_path"]).iterdir())
        self._record("upload_folder", **kwargs)
        return type("CommitInfo", (), {"oid": "f" * 40})()


@pytest.fixture
def fake_api(monkeypatch):
    import huggingface_hub

    monkeypatch.delenv("HF_HUB_OFFLINE", raising=False)
    monkeypatch.setattr(huggingface_hub.constants, "HF_HUB_OFFLINE", False)
    monkeypatch.setenv("HF_TOKEN", "hf_test")
    monkeypatch.setattr(huggingface_hub, "HfApi", FakeApi)
    FakeApi.calls, FakeApi.fail_on, FakeApi.refuse_on = [], None, None
    return FakeApi


def test_upload_creates_the_repo_and_branch_and_sends_the_model_files(run, fake_api, capsys):
    publish.main([str(run), "--repo-id", "me/tiny", "--private", "--revision", "v1",
                  "--license", "mit"])
    names = [name for name, _ in fake_api.calls]
    assert names == ["init", "whoami", "create_repo", "create_branch", "upload_folder"]
    calls = dict(fake_api.calls)
    assert calls["init"]["token"] == "hf_test"
    assert calls["create_repo"] == {"repo_id": "me/tiny", "repo_type": "model", "private": True,
                                    "exist_ok": True}
    assert calls["create_branch"]["branch"] == "v1"
    upload = calls["upload_folder"]
    assert upload["repo_id"] == "me/tiny" and upload["revision"] == "v1"
    assert upload["repo_type"] == "model"
    assert upload["files"] == sorted(published_models.MODEL_FILES)
    assert f"load it with hf://me/tiny@{'f' * 40}" in capsys.readouterr().out


def test_a_lost_connection_is_one_error_that_says_a_rerun_resumes(run, fake_api, capsys):
    fake_api.fail_on = "upload_folder"
    with pytest.raises(SystemExit):
        publish.main([str(run), "--repo-id", "me/tiny", "--license", "mit"])
    err = capsys.readouterr().err
    assert "could not upload to me/tiny (ConnectError" in err and "rerun" in err


def test_a_refused_upload_names_the_reason(run, fake_api, capsys):
    fake_api.refuse_on = "create_repo"
    with pytest.raises(SystemExit):
        publish.main([str(run), "--repo-id", "other/tiny", "--license", "mit"])
    err = capsys.readouterr().err
    assert "the Hub refused to take the upload to other/tiny: 403 Forbidden" in err
    assert "(the token lacks write access there)" in err
    assert [name for name, _ in fake_api.calls] == ["init", "whoami", "create_repo"]


def test_without_a_token_nothing_is_sent_nor_staged(run, fake_api, monkeypatch, capsys):
    """The token is checked first: staging and listing every file took 15 s before the
    missing token was said."""
    import huggingface_hub

    def no_staging(*args, **kwargs):
        raise AssertionError("staged before the token was checked")

    monkeypatch.delenv("HF_TOKEN")
    monkeypatch.setattr(huggingface_hub, "get_token", lambda: None)
    monkeypatch.setattr(publish, "stage_files", no_staging)
    with pytest.raises(SystemExit):
        publish.main([str(run), "--repo-id", "me/tiny", "--license", "mit"])
    captured = capsys.readouterr()
    assert captured.err.startswith("error: no Hugging Face token") and captured.out == ""
    assert fake_api.calls == []


def test_the_real_client_fails_fast_when_the_hub_is_unreachable(run, monkeypatch, capsys):
    from huggingface_hub import constants

    monkeypatch.delenv("HF_HUB_OFFLINE", raising=False)
    monkeypatch.setattr(constants, "HF_HUB_OFFLINE", False)
    monkeypatch.setattr(constants, "ENDPOINT", "http://127.0.0.1:9")  # nothing listens there
    monkeypatch.setenv("HF_TOKEN", "hf_test")
    with pytest.raises(SystemExit):
        publish.main([str(run), "--repo-id", "me/tiny", "--license", "mit"])
    assert "could not reach http://127.0.0.1:9" in capsys.readouterr().err


@pytest.mark.slow
def test_a_sample_run_published_and_loaded_from_the_cache_gives_identical_metrics(
        tmp_path, hf_cache):  # noqa: F811 -- the fixture
    """The issue's round trip: train on the sample, publish --dry-run --stage, load the
    files from huggingface_hub's cache layout offline, evaluate: the same test metrics."""
    from rudder import train

    train.main(["--dataset", "sample", "--epochs", "2", "--output-dir", str(tmp_path / "run"),
                "--set", "model.shared_dim=16", "--set", "model.word_dim=8"])
    publish.main([str(tmp_path / "run"), "--repo-id", "me/sample-ce", "--dry-run",
                  "--stage", str(tmp_path / "staged")])
    assert front(tmp_path / "staged")["license"] == "mit"  # the sample card's
    fake_cache(hf_cache, tmp_path / "staged", repo="models--me--sample-ce")
    summary = evaluate.main(["hf://me/sample-ce", "--output", str(tmp_path / "e")])
    trained = json.loads(metrics_file(tmp_path / "run").read_text())
    assert summary["test"] == trained["test"]
    assert summary["runs"] == [f"hf://me/sample-ce@{SHA}"]
    assert yaml.safe_load((tmp_path / "staged" / "config.yaml").read_text())["data"][
        "dataset"] == "sample"
