"""``python -m app``: flags, choosing or training a checkpoint, export, and a real trained run."""

import os
import time
from pathlib import Path

import pytest
import torch

import app.__main__ as cli
import app.ui
from app.annotations_db import AnnotationStore
from rudder.errors import RunError


def test_auth_flag():
    logins = cli.parse_auth(["asha:s3:cret", "bala:pw"])
    assert logins.users == ["asha", "bala"] and logins("asha", "s3:cret")
    assert cli.parse_auth([]) is None
    for bad in ("asha", ":pw", "asha:"):
        with pytest.raises(RunError, match="user:pass"):
            cli.parse_auth(bad)


@pytest.mark.parametrize("argv", [["--auth", "asha"], ["--media", "/no/such/folder"],
                                  ["--db", "/no/such.sqlite", "--export", "/tmp/x"]])
def test_a_user_error_is_one_line_and_exit_code_2(argv, capsys):
    with pytest.raises(SystemExit) as exit_info:
        cli.main(argv)
    assert exit_info.value.code == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("error: "), err


FIVE = ["mr", "hi", "ta", "te", "en"]


def fake_run(root: Path, name: str, dataset: str, age: float, langs=FIVE,
             finished: bool = True) -> Path:
    run = root / name
    (run / "checkpoints").mkdir(parents=True)
    if finished:
        (run / "metrics.json").write_text("{}")
    config = f"data:\n  dataset: {dataset}\n"
    if langs is not None:
        config += f"  caption_langs: [{', '.join(langs)}]\n"
    (run / "config.yaml").write_text(config)
    best = run / "checkpoints" / "best.pt"
    best.write_bytes(b"")
    stamp = time.time() - age
    os.utime(best, (stamp, stamp))
    return run


def test_newest_run_trained_on_the_dataset(tmp_path):
    fake_run(tmp_path, "old-sample", "sample", age=300)
    newer = fake_run(tmp_path, "new-sample", "sample", age=100)
    fake_run(tmp_path, "newest-other", "/data/other", age=10)
    (tmp_path / "broken" / "checkpoints").mkdir(parents=True)
    (tmp_path / "broken" / "checkpoints" / "best.pt").write_bytes(b"")  # no config: skipped
    assert cli.newest_run_for(tmp_path, "sample") == newer
    assert cli.newest_run_for(tmp_path, "elsewhere") is None
    assert cli.newest_run_for(tmp_path / "missing", "sample") is None


def test_runs_missing_a_language_of_the_dataset_are_passed_over(tmp_path):
    covering = fake_run(tmp_path, "five", "sample", age=300)
    fake_run(tmp_path, "three", "sample", age=100, langs=["mr", "hi", "en"])
    fake_run(tmp_path, "default", "sample", age=50, langs=None)  # the default: mr, hi, en
    assert cli.newest_run_for(tmp_path, "sample", FIVE) == covering
    assert cli.newest_run_for(tmp_path, "sample", ["mr"]).name == "default"
    assert cli.newest_run_for(tmp_path / "five", "sample", FIVE + ["xx"]) is None


def test_the_quick_model_learns_every_language_of_the_dataset(monkeypatch, tmp_path):
    from rudder import train

    calls = []
    monkeypatch.setattr(train, "main", calls.append)
    out = cli.train_quick(tmp_path, "sample", 2, FIVE)
    (argv,) = calls
    settings = [argv[i + 1] for i, arg in enumerate(argv) if arg == "--set"]
    assert "data.caption_langs=[mr,hi,ta,te,en]" in settings
    assert "data.caption_sampling=all" in settings
    assert argv[argv.index("--output-dir") + 1] == str(out) and out.parent == tmp_path


class Recorder:
    def __init__(self):
        self.calls = []

    def __call__(self, name, result=None):
        def record(*args, **kwargs):
            self.calls.append((name, args, kwargs))
            return result

        return record


@pytest.fixture
def patched(monkeypatch, tmp_path):
    """main() with training, loading, building and serving replaced by recorders."""
    import app.ui
    import rudder.data.lookup
    import rudder.evaluation.loading

    recorder = Recorder()

    class Run:
        model, vocab, fingerprint, source = "model", "vocab", "fp", None
        dataset = type("Folder", (), {"root": tmp_path / "data"})()
        checkpoint, run_dir = tmp_path / "run" / "checkpoints" / "best.pt", tmp_path / "run"
        data = type("D", (), {"max_words": 12, "max_frames": 8, "caption_langs": FIVE})
        data.text_encoder, data.dataset = None, "sample"
        config = type("C", (), {"data": data()})()

    monkeypatch.setattr(cli, "train_quick", recorder("train", tmp_path / "runs" / "quick"))
    monkeypatch.setattr(rudder.evaluation.loading, "load_run", recorder("load", Run()))
    meta = type("Meta", (), {"languages": FIVE})()
    monkeypatch.setattr(
        rudder.data.lookup, "resolve_dataset", lambda spec: type("Folder", (), {"meta": meta})()
    )
    monkeypatch.setattr(app.ui, "build_app", recorder("build", "demo"))
    monkeypatch.setattr(app.ui, "launch_app", recorder("launch"))
    return recorder


def test_no_checkpoint_serves_the_page_then_trains_a_quick_one(patched, monkeypatch, tmp_path):
    demo = type("Demo", (), {"rudder_collection": "collection"})()
    monkeypatch.setattr(app.ui, "build_app", patched("build", demo))
    monkeypatch.setattr(cli, "engine_for", patched("engine", "engine"))
    cli.main(["--runs", str(tmp_path / "runs"), "--db", str(tmp_path / "l.sqlite")])
    slot = patched.calls[0][2]["pending"]
    deadline = time.monotonic() + 30
    while not (slot.ready or slot.error) and time.monotonic() < deadline:
        time.sleep(0.01)
    calls = {name: (args, kwargs) for name, args, kwargs in patched.calls}
    # Built first; trained (in a thread started just before the server), loaded, handed over.
    assert [name for name, *_ in patched.calls if name != "launch"] == [
        "build", "train", "load", "engine"
    ]
    (build_args, build_kwargs), (launch_args, launch_kwargs) = calls["build"], calls["launch"]
    (train_args, train_kwargs), (load_args, load_kwargs) = calls["train"], calls["load"]
    engine_args = calls["engine"][0]
    assert build_args[:2] == (None, None) and build_kwargs["media_dir"] is None
    assert train_args == (tmp_path / "runs", "sample", cli.QUICK_EPOCHS, FIVE)
    assert train_kwargs["out"] == slot.run_dir and slot.run_dir.parent == tmp_path / "runs"
    assert load_args == (slot.run_dir,) and load_kwargs == {"dataset": None}
    assert engine_args[1] == "collection" and slot.engine == "engine" and slot.error is None
    assert "Collaborative Experts" in slot.description
    assert launch_args == (demo,) and launch_kwargs == {
        "host": "127.0.0.1",
        "port": 7860,
        "auth": None,
    }


def test_unfinished_runs_are_not_served(tmp_path):
    fake_run(tmp_path, "done", "sample", age=300)
    fake_run(tmp_path, "interrupted", "sample", age=10, finished=False)
    assert cli.newest_run_for(tmp_path, "sample").name == "done"


def test_after_the_main_job_the_app_serves_its_run_and_says_what_it_reads(
        patched, monkeypatch, tmp_path, capsys):
    """The main job trains Marathi, Hindi and English: the app serves that run (no second
    training), names the languages it reads and how to get the others."""
    import rudder.evaluation.loading

    main_job = fake_run(tmp_path / "runs", "20260101-000000-ce", "sample", age=0,
                        langs=["mr", "hi", "en"])
    run = rudder.evaluation.loading.load_run()  # the patched loader's run, trained on three
    patched.calls.clear()
    run.config.data.caption_langs = ["mr", "hi", "en"]
    run.dataset.meta = type("Meta", (), {"languages": FIVE})()
    monkeypatch.setattr(rudder.evaluation.loading, "load_run", patched("load", run))
    cli.main(["--runs", str(tmp_path / "runs"), "--db", str(tmp_path / "l.sqlite")])
    assert [name for name, *_ in patched.calls] == ["load", "build", "launch"]
    assert patched.calls[0][1] == (main_job,)
    err = capsys.readouterr().err
    assert "it reads Marathi, Hindi, English (its training captions)" in err
    assert "Tamil, Telugu queries get a warning" in err and "--quick-model" in err
    patched.calls.clear()
    cli.main(["--runs", str(tmp_path / "runs"), "--db", str(tmp_path / "l.sqlite"),
              "--quick-model"])
    assert [name for name, *_ in patched.calls][:2] == ["build", "train"]  # the quick model


def quick_leftover(runs: Path, stamp: str, checkpoint: bool) -> Path:
    """What a Ctrl-C during the app's first training leaves: the run folder with its saved
    config, an empty log and (before the first epoch) empty checkpoint folders."""
    from rudder import train
    from rudder.runs.layout import config_file, write_config

    run = runs / f"{stamp}-{cli.QUICK_NAME}"
    (run / "checkpoints").mkdir(parents=True)
    (run / "train.log").write_text("")
    args = train.build_parser().parse_args(cli.quick_train_args("sample", cli.QUICK_EPOCHS,
                                                                FIVE, run))
    write_config(run, train.resolve_config(args))
    assert config_file(run).is_file()
    if checkpoint:
        (run / "checkpoints" / "last.pt").write_bytes(b"")
    return run


def wait_for(slot):
    deadline = time.monotonic() + 30
    while not (slot.ready or slot.error) and time.monotonic() < deadline:
        time.sleep(0.01)


def test_an_interrupted_first_training_is_cleaned_up_or_resumed(patched, monkeypatch,
                                                                 tmp_path):
    demo = type("Demo", (), {"rudder_collection": "collection"})()
    monkeypatch.setattr(app.ui, "build_app", patched("build", demo))
    monkeypatch.setattr(cli, "engine_for", patched("engine", "engine"))
    runs = tmp_path / "runs"
    empty_old = quick_leftover(runs, "20260101-000000", checkpoint=False)
    empty_new = quick_leftover(runs, "20260103-000000", checkpoint=False)
    cli.main(["--runs", str(runs), "--db", str(tmp_path / "l.sqlite")])
    wait_for(patched.calls[0][2]["pending"])
    assert not empty_old.exists() and not empty_new.exists()  # nothing to resume: removed
    train_call = next(c for c in patched.calls if c[0] == "train")
    assert train_call[2]["resume"] is False and train_call[2]["out"].parent == runs

    patched.calls.clear()
    started = quick_leftover(runs, "20260102-000000", checkpoint=True)
    cli.main(["--runs", str(runs), "--db", str(tmp_path / "l.sqlite")])
    wait_for(patched.calls[0][2]["pending"])
    train_call = next(c for c in patched.calls if c[0] == "train")
    assert train_call[2] == {"out": started, "resume": True}  # resumed where it stopped
    assert patched.calls[0][2]["pending"].run_dir == started


def test_a_failed_first_training_is_shown_on_the_page(patched, monkeypatch, tmp_path):
    demo = type("Demo", (), {"rudder_collection": "collection"})()
    monkeypatch.setattr(app.ui, "build_app", patched("build", demo))

    def fail(*args, **kwargs):
        raise SystemExit(2)

    monkeypatch.setattr(cli, "train_quick", fail)
    cli.main(["--runs", str(tmp_path / "runs"), "--db", str(tmp_path / "l.sqlite")])
    slot = patched.calls[0][2]["pending"]
    deadline = time.monotonic() + 30
    while not slot.error and time.monotonic() < deadline:
        time.sleep(0.01)
    assert "exit status 2" in slot.error and not slot.ready


def test_flags_reach_the_server(patched, tmp_path, capsys):
    run = fake_run(tmp_path / "runs", "r", "sample", age=0)
    media = tmp_path / "media"
    media.mkdir()
    cli.main(
        [
            "--runs",
            str(tmp_path / "runs"),
            "--host",
            "0.0.0.0",
            "--port",
            "9000",
            "--auth",
            "u:p",
            "--media",
            str(media),
            "--db",
            str(tmp_path / "l.sqlite"),
        ]
    )
    names = [name for name, *_ in patched.calls]
    assert names == ["load", "build", "launch"]  # an existing run on all five: no training
    assert patched.calls[0][1] == (run,)
    assert patched.calls[1][2]["media_dir"] == media
    launched = patched.calls[2][2]
    assert launched["host"] == "0.0.0.0" and launched["port"] == 9000
    assert launched["auth"].users == ["u"] and launched["auth"]("u", "p")
    with pytest.raises(SystemExit):
        cli.main(["--media", str(tmp_path / "nope")])
    assert "is not a folder" in capsys.readouterr().err


def test_export_flag(tmp_path, capsys):
    store = AnnotationStore(tmp_path / "l.sqlite")
    store.add("sample", "asha", "a", "b", "partial")
    cli.main(["--db", str(tmp_path / "l.sqlite"), "--export", str(tmp_path / "out")])
    assert (tmp_path / "out" / "relations.jsonl").read_text(encoding="utf-8").count("\n") == 1
    assert "relations.csv" in capsys.readouterr().out
    with pytest.raises(SystemExit):
        cli.main(["--db", str(tmp_path / "missing.sqlite"), "--export", str(tmp_path / "out")])
    assert "does not exist" in capsys.readouterr().err


def test_a_bad_db_is_one_line_naming_it_before_the_model_loads(patched, tmp_path, capsys):
    bad = tmp_path / "notes.sqlite"
    bad.write_text("not sqlite", encoding="utf-8")
    for argv in (["--db", str(bad)], ["--db", str(bad), "--export", str(tmp_path / "out")]):
        with pytest.raises(SystemExit) as exit_info:
            cli.main(argv)
        assert exit_info.value.code == 2
        assert f"error: {bad}: not an annotation database" in capsys.readouterr().err
    assert patched.calls == []  # no model trained or loaded


@pytest.mark.slow
def test_the_default_model_reads_tamil_and_telugu(app_dataset, tmp_path):
    """Today's default (Marathi, Hindi, English only) maps every Tamil word to <unk>."""
    from rudder.evaluation.loading import load_run

    run = load_run(cli.train_quick(tmp_path, str(app_dataset.root), 2, FIVE))
    assert run.config.data.caption_langs == FIVE
    if run.config.data.text_encoder:  # the multilingual extra: one sentence vector per query
        assert run.config.data.text_encoder == "multilingual-e5"
        features, _ = run.encode_queries(["కాగితం మడవండి"], ["te"])
        assert features.shape == (1, 1, 384)
    else:
        tokens, _ = run.encode_queries(["காகிதம் மடியுங்கள்", "கார் வரையுங்கள்"], ["ta", "ta"])
        assert (tokens > 1).all()  # every word known (0 is padding, 1 unknown)
        tokens, _ = run.encode_queries(["కాగితం మడవండి"], ["te"])
        assert (tokens > 1).all()
    text, _ = run.model.encode_text(*run.encode_queries(["காகிதம்", "கார்"], ["ta", "ta"]))
    assert not torch.allclose(text[0], text[1])  # two Tamil queries, two different embeddings


@pytest.mark.slow
def test_trained_checkpoint_is_served(app_dataset, tmp_path, monkeypatch, port):
    """The real path: rudder.train.main trains one epoch, python -m app serves it."""
    from gradio_client import Client

    import app.ui
    from rudder import train

    run = tmp_path / "runs" / "r1"
    train.main(
        [
            "--dataset",
            str(app_dataset.root),
            "--epochs",
            "1",
            "--output-dir",
            str(run),
            "--set",
            "data.caption_langs=[mr,hi,ta,te,en]",
            "--set",
            "data.batch_size=8",
            "--set",
            "model.shared_dim=16",
        ]
    )
    served = {}
    real_launch = app.ui.launch_app

    def launch(demo, **kwargs):
        served["demo"] = demo
        return real_launch(
            demo, host=kwargs["host"], port=port(), prevent_thread_lock=True, quiet=True
        )

    monkeypatch.setattr(app.ui, "launch_app", launch)
    monkeypatch.setenv("RUDDER_CACHE", str(tmp_path / "cache"))
    cli.main(
        [
            "--dataset",
            str(app_dataset.root),
            "--runs",
            str(tmp_path / "runs"),
            "--db",
            str(tmp_path / "l.sqlite"),
        ]
    )
    try:
        client = Client(served["demo"].local_url, verbose=False, analytics_enabled=False)
        status, table, _ = client.predict(
            "कागद दुमडा", "auto", "en", 5, False, "en", api_name="/search"
        )
        assert "Marathi" in status and len(table["data"]) == 5
        assert list((tmp_path / "cache" / "index").glob("*.pt"))  # keyed by the run's fingerprint
    finally:
        served["demo"].close()


def test_help_lists_every_flag():
    text = cli.build_parser().format_help()
    for flag in (
        "--dataset",
        "--checkpoint",
        "--host",
        "--port",
        "--auth",
        "--media",
        "--db",
        "--runs",
    ):
        assert flag in text


def test_analytics_and_telemetry_are_off(served):
    assert os.environ["GRADIO_ANALYTICS_ENABLED"] == "False"
    assert os.environ["HF_HUB_DISABLE_TELEMETRY"] in ("1", "True")  # Gradio rewrites it as True
    assert served[2].analytics_enabled is False
