"""Command line: ``python -m datasets_scripts {build,translate,publish,demo-videos} ...`` (see
``--help``)."""

from __future__ import annotations

import argparse
import importlib
import shlex
import sys
from pathlib import Path

from rudder.cli import ArgumentParser, float_in, folder, int_in
from rudder.data.layout import LayoutError
from rudder.errors import RudderError, one_line
from rudder.languages import SUPPORTED, UnsupportedLanguageError
from rudder.optional import Need, check_installed

from . import BUILDERS
from .build_report import BuildError, Reporter
from .cards import recorded_command


def _add_build(commands) -> None:
    build = commands.add_parser("build", help="build a dataset folder from a public release")
    sources = build.add_subparsers(dest="name", required=True, metavar="NAME")
    for name, module_name in BUILDERS.items():
        module = importlib.import_module(module_name, __package__)
        aliases = [name.replace("_", "-")] if "_" in name else []
        parser = sources.add_parser(
            name,
            aliases=aliases,
            help=(module.__doc__ or "").splitlines()[0],
            description=module.__doc__,
            formatter_class=argparse.RawDescriptionHelpFormatter,
        )
        parser.add_argument("--src", type=folder, required=True,
                            help=getattr(module, "SRC_HELP", "folder of the release files"))
        parser.add_argument("--out", type=folder, required=True, help="dataset folder to create")
        if hasattr(module, "run_build"):  # a builder with its own inputs (build videos)
            parser.add_argument("--strict", action="store_true", help="stop at the first problem")
            parser.add_argument("--overwrite", action="store_true", help="replace --out")
            module.add_arguments(parser)
            parser.set_defaults(run=module.run_build, module=module)
            continue
        parser.add_argument(
            "--features",
            type=folder,
            default=None,
            help="folder of expert features (CE pickles, <expert>/*.npy, *.h5)",
        )
        parser.add_argument(
            "--expert-map",
            action="append",
            default=[],
            metavar="PATTERN=EXPERT",
            help="name the expert of matching feature files, e.g. '*senet154*=object'",
        )
        parser.add_argument(
            "--expert-map-file",
            type=Path,
            default=None,
            help="JSON/YAML {pattern: expert}, after the --expert-map flags",
        )
        parser.add_argument(
            "--keep-zero-features",
            action="store_true",
            help="treat all-zero feature arrays as data (default: missing, as CE)",
        )
        parser.add_argument("--strict", action="store_true", help="stop at the first bad record")
        parser.add_argument(
            "--text-features", type=Path, metavar="PICKLE",
            help="Collaborative Experts text-feature pickle (video id -> per-caption "
            "(tokens, D) arrays, captions in release order) stored as the text_features config "
            "(train with --set data.text_encoder=dataset)",
        )
        parser.add_argument(
            "--overwrite", action="store_true", help="replace an existing --out folder"
        )
        module.add_arguments(parser)
        parser.set_defaults(run=run_build, module=module)


def _check_out(args) -> Path:
    """``--out`` resolved; it may replace only a dataset folder, never the inputs."""
    out = args.out.resolve()
    inputs = {"--src": args.src, "--features": args.features, "--text-features": args.text_features}
    for flag, path in inputs.items():
        if path is not None and (out == path.resolve() or out in path.resolve().parents):
            raise BuildError(
                f"--out {args.out} is or contains {flag} {path}: the build would replace its "
                "own input; choose another --out folder"
            )
    if out.exists() and not args.overwrite:
        raise BuildError(f"{args.out} already exists; pass --overwrite to replace it")
    if out.exists() and not (out / "rudder.json").is_file():
        raise BuildError(
            f"{args.out} is not a rudder dataset folder (no rudder.json); refusing to replace "
            "it with --overwrite: choose another --out, or move it away yourself"
        )
    return out


def run_build(args, argv) -> int:
    from .build import write_dataset
    from .features import discover, read_expert_map

    args.out = _check_out(args)
    mapping = read_expert_map(args.expert_map, args.expert_map_file)
    reporter = Reporter(strict=args.strict)
    raw = args.module.read(args, reporter)
    if args.features:
        extra = discover(args.features, mapping, reporter)
        clash = {s.expert for s in raw.feature_sources} & {s.expert for s in extra}
        if clash:
            raise BuildError(
                f"expert(s) {sorted(clash)} come both from the release and from "
                f"--features {args.features}; rename them with --expert-map"
            )
        raw.feature_sources += extra
    command = recorded_command(argv)
    write_dataset(
        raw,
        args.out,
        reporter,
        command=command,
        overwrite=args.overwrite,
        keep_zeros=args.keep_zero_features,
        text_features=args.text_features,
    )
    return 0


def run_translate(args, argv) -> int:
    from .translate import translate_dataset

    check_installed([Need("googletrans", "translate", "datasets_scripts translate")])

    added = translate_dataset(
        args.out,
        args.source_lang,
        args.to,
        cache_path=args.cache,
        batch_size=args.batch_size,
        texts_per_second=args.rate,
        timeout=args.timeout,
    )
    if not added:
        print("nothing to translate: the dataset was left as it was", file=sys.stderr)
    return 0


def run_publish(args, argv) -> int:
    from .publish import publish

    publish(
        args.out, args.repo_id, private=args.private, dry_run=args.dry_run, timeout=args.timeout
    )
    return 0


def run_demo_videos(args, argv) -> int:
    from .demo_videos import CLIPS, write_demo

    check_installed([Need("av", "videos", "writing the demo videos")])
    out = write_demo(args.out, overwrite=args.overwrite)
    src, captions = shlex.quote(str(out / "videos")), shlex.quote(str(out / "captions.csv"))
    print(f"wrote {len(CLIPS)} clips to {out / 'videos'} and {3 * len(CLIPS)} captions to "
          f"{out / 'captions.csv'}; build a dataset from them with\n"
          f"  python -m datasets_scripts build videos --src {src} --captions {captions} "
          f"--out {shlex.quote(str(out / 'dataset'))}\n(offline, --expert object=resnet18@random "
          "--expert audio=logmel stands in for the published weights: a pipeline check "
          "only)", file=sys.stderr)
    return 0


_positive_int = int_in(1, 100_000)
_seconds = float_in(0, 3600, low_open=True)


def build_parser() -> argparse.ArgumentParser:
    parser = ArgumentParser(prog=f"python -m {__package__}", description=__doc__)
    commands = parser.add_subparsers(dest="command", required=True)
    _add_build(commands)
    translate = commands.add_parser(
        "translate", help="add machine-translated captions (googletrans)"
    )
    translate.add_argument("out", type=folder, help="a built dataset folder")
    translate.add_argument("--from", dest="source_lang", required=True, choices=SUPPORTED)
    translate.add_argument("--to", nargs="+", required=True, choices=SUPPORTED)
    translate.add_argument(
        "--cache",
        type=Path,
        default=None,
        help="SQLite cache (default $RUDDER_CACHE/translations.sqlite)",
    )
    translate.add_argument(
        "--batch-size", type=_positive_int, default=20, help="texts per request (default 20)"
    )
    translate.add_argument("--rate", type=float_in(0, 1000), default=5.0,
                           help="texts per second (default 5; 0: no limit)")
    translate.add_argument("--timeout", type=_seconds, default=10.0, help="seconds per request")
    translate.set_defaults(run=run_translate)
    publish = commands.add_parser("publish", help="upload a built folder to the Hugging Face Hub")
    publish.add_argument("out", type=folder, help="a built dataset folder")
    publish.add_argument("--repo-id", required=True, help="USER/NAME of the dataset repo")
    publish.add_argument("--private", action="store_true")
    publish.add_argument("--dry-run", action="store_true", help="validate and list, upload nothing")
    publish.add_argument(
        "--timeout", type=_seconds, default=5.0,
        help="seconds the Hub may take to connect and to answer the first request (default 5)",
    )
    publish.set_defaults(run=run_publish)
    demo = commands.add_parser(
        "demo-videos", help="write short demo clips and a captions file for build videos",
        description=importlib.import_module(".demo_videos", __package__).__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    demo.add_argument("out", type=folder, help="folder to create: OUT/videos, OUT/captions.csv")
    demo.add_argument("--overwrite", action="store_true", help="replace a non-empty OUT")
    demo.set_defaults(run=run_demo_videos)
    return parser


def main(argv: list[str] | None = None) -> int:
    from rudder.translate import TranslationUnavailable

    from .publish import PublishError

    argv = list(sys.argv[1:] if argv is None else argv)
    args = build_parser().parse_args(argv)
    try:
        return args.run(args, argv)
    except (
        BuildError,
        LayoutError,
        UnsupportedLanguageError,
        PublishError,
        TranslationUnavailable,
        RudderError,
    ) as error:
        print(f"error: {one_line(error)}", file=sys.stderr)
        return 2
    except OSError as error:  # a file the system cannot read or write, e.g. an unwritable --out
        where = f"{error.filename}: " if error.filename else ""
        print(f"error: {where}{error.strerror or one_line(error)}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
