"""``python -m heuristics <command>``: taggers, noun/verb columns and relations for a dataset."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from rudder.cli import ArgumentParser, float_in, folder, int_in, output_file
from rudder.config import MAX_SEED
from rudder.data.layout import LayoutError
from rudder.errors import RudderError, one_line
from rudder.languages import UnsupportedLanguageError
from rudder.optional import Need, check_installed

from . import commands
from .classes import ClassFileError
from .conllu import ConlluError
from .download import DownloadError
from .label import LabelError
from .relations import RelationError
from .retrain import RetrainError
from .stanza_training import SIZES, TrainingError, TrainOptions
from .stop_nouns import StopNounError
from .taggers import TaggerError

ERRORS = (
    ConlluError,
    ClassFileError,
    DownloadError,
    LabelError,
    RelationError,
    RetrainError,
    TrainingError,
    TaggerError,
    UnsupportedLanguageError,
    LayoutError,
    RudderError,
    StopNounError,
)


MODEL_DIR_HELP = (
    "Stanza model folder, the same for every command "
    "(default $STANZA_RESOURCES_DIR, else $RUDDER_CACHE/stanza = ~/.cache/rudder/stanza)"
)


positive_int = int_in(1, 10**9)  # counts and steps
share = float_in(0.0, 1.0)  # an overlap threshold alpha
seed = int_in(0, MAX_SEED)


def _tagger_args(parser) -> None:
    parser.add_argument("--tagger", choices=("stanza", "lexicon"), default="stanza")
    parser.add_argument("--model-dir", type=folder, help=MODEL_DIR_HELP)
    parser.add_argument(
        "--lexicon",
        type=Path,
        action="append",
        default=[],
        help="lexicon TSV concept_id,pos,lang,lemma (repeatable): classes, and words for "
        "--tagger lexicon",
    )
    parser.add_argument("--cache", type=Path, help="tag cache (default $RUDDER_CACHE/tags.sqlite)")
    parser.add_argument("--no-cache", action="store_true")
    parser.add_argument("--no-phrasal-verbs", action="store_true", help="keep 'pick up' as 'pick'")
    parser.add_argument(
        "--no-light-verbs", action="store_true", help="keep hi/mr noun + कर as the light verb alone"
    )
    parser.add_argument(
        "--no-noun-compounds", action="store_true", help="keep English noun compounds apart"
    )


def build_parser() -> argparse.ArgumentParser:
    parser = ArgumentParser(prog=f"python -m {__package__}", description=__doc__)
    sub = parser.add_subparsers(dest="command", required=True)

    p = sub.add_parser("download", help="fetch Stanza's official models (needs a network)")
    p.add_argument("--lang", nargs="+", required=True)
    p.add_argument("--model-dir", type=folder, help=MODEL_DIR_HELP)
    p.add_argument("--timeout", type=float_in(0, 3600, low_open=True), default=5.0)
    p.add_argument(
        "--overwrite", action="store_true", help="replace models trained by train-tagger"
    )
    p.set_defaults(run=commands.cmd_download)

    p = sub.add_parser("train-tagger", help="train Stanza POS + lemmatizer offline from CoNLL-U")
    p.add_argument("--lang", required=True)
    p.add_argument("--train", type=Path, required=True)
    p.add_argument("--dev", type=Path, required=True)
    p.add_argument("--model-dir", "--out", type=folder, help=MODEL_DIR_HELP)
    p.add_argument("--size", choices=sorted(SIZES), default=TrainOptions.size)
    p.add_argument("--max-steps", type=positive_int, default=TrainOptions.max_steps)
    p.add_argument("--batch-size", type=positive_int, default=TrainOptions.batch_size)
    p.add_argument(
        "--eval-interval",
        type=positive_int,
        default=TrainOptions.eval_interval,
        help="steps between dev scores",
    )
    p.add_argument("--lemma-steps", type=positive_int, default=TrainOptions.lemma_steps)
    p.add_argument("--seed", type=seed, default=TrainOptions.seed)
    p.add_argument("--verbose", action="store_true", help="show Stanza's whole training log")
    p.add_argument("--quiet", action="store_true", help="no progress lines (steps, loss, dev)")
    p.set_defaults(run=commands.cmd_train_tagger)

    p = sub.add_parser(
        "eval-tagger", help="UPOS/lemma accuracy and noun/verb P/R/F1 on a CoNLL-U file"
    )
    p.add_argument("--conllu", type=Path, required=True)
    p.add_argument(
        "--model-dir", "--model", type=folder, help=MODEL_DIR_HELP + "; or its <lang> folder"
    )
    p.add_argument("--lang", help="needed when the directory holds several languages")
    p.add_argument("--report", type=output_file, help="also write the scores as JSON")
    p.set_defaults(run=commands.cmd_eval_tagger)

    p = sub.add_parser(
        "tag", help="tag texts and print words, nouns, verbs and classes as JSON lines"
    )
    p.add_argument("text", nargs="*")
    p.add_argument("--lang", required=True)
    p.add_argument("--input", type=Path, help="one text per line")
    p.add_argument(
        "--dataset", type=folder, help="captions with nouns/verbs to build the lexicon tagger from"
    )
    p.add_argument(
        "--noun-classes", type=Path, action="append", help="EPIC-KITCHENS-100 noun class CSV"
    )
    p.add_argument(
        "--verb-classes", type=Path, action="append", help="EPIC-KITCHENS-100 verb class CSV"
    )
    _tagger_args(p)
    p.set_defaults(run=commands.cmd_tag)

    p = sub.add_parser(
        "label", help="add nouns/verbs/noun_classes/verb_classes to a dataset's captions"
    )
    p.add_argument("--dataset", type=folder, required=True)
    p.add_argument("--alpha-n", type=share, default=0.5)
    p.add_argument("--alpha-v", type=share, default=0.5)
    p.add_argument("--dry-run", action="store_true", help="only print the statistics")
    p.add_argument(
        "--overwrite", action="store_true", help="replace existing (manual) noun/verb columns"
    )
    p.add_argument(
        "--noun-classes", type=Path, action="append", help="EPIC-KITCHENS-100 noun class CSV"
    )
    p.add_argument(
        "--verb-classes", type=Path, action="append", help="EPIC-KITCHENS-100 verb class CSV"
    )
    p.add_argument(
        "--num-proc", type=positive_int, default=1, help="tagging processes (datasets.map)"
    )
    p.add_argument(
        "--stats-queries",
        type=positive_int,
        default=5000,
        help="queries per split for the statistics",
    )
    p.add_argument(
        "--langs", nargs="+", help="label only captions in these languages (default: all)"
    )
    p.add_argument(
        "--sample-pairs", type=int_in(0, 10**6), default=0,
        help="print N random labelled pairs per split"
    )
    p.add_argument("--seed", type=seed, default=0, help="seed of --sample-pairs")
    p.add_argument("--report", type=output_file, help="also write the statistics as JSON")
    p.add_argument(
        "--stop-nouns", type=Path, help="TSV lang<TAB>lemma of subject nouns not counted"
    )
    p.add_argument("--no-stop-nouns", action="store_true", help="count every noun")
    _tagger_args(p)
    p.set_defaults(run=commands.cmd_label)

    from . import eval_classes

    p = sub.add_parser(
        "eval-classes", help="verb/noun class accuracy of extraction on EPIC-format sentences"
    )
    eval_classes.add_arguments(p)
    p.set_defaults(run=eval_classes.run)

    p = sub.add_parser("video-relations", help="RUDDER's video-based heuristic -> relations")
    p.add_argument("--dataset", type=folder, required=True)
    p.add_argument(
        "--sets", type=Path, required=True, help="CSV video_id,objects,actions (or Charades' CSV)"
    )
    p.add_argument("--alpha-o", type=share, default=0.5)
    p.add_argument("--alpha-a", type=share, default=0.5)
    p.add_argument("--dry-run", action="store_true")
    p.set_defaults(run=commands.cmd_video_relations)

    p = sub.add_parser(
        "import-relations", help="import manual relations (app export .jsonl or .csv)"
    )
    p.add_argument("--dataset", type=folder, required=True)
    p.add_argument("files", type=Path, nargs="+")
    p.add_argument("--annotator", default="manual", help="annotator of rows that name none")
    p.add_argument(
        "--resolve",
        default="refuse",
        help="when annotators give one ordered pair different labels: refuse (default), "
        "majority or annotator:NAME (manual labels always override video-heuristic ones)",
    )
    p.add_argument("--dry-run", action="store_true")
    p.set_defaults(run=commands.cmd_import_relations)

    p = sub.add_parser(
        "retrain", help="train PO(M) on the labels settled in the app's annotation database"
    )
    p.add_argument("--dataset", required=True, help="'sample', a dataset folder or a Hub repo id")
    p.add_argument(
        "--from-labels", type=Path, required=True, metavar="APP_DB",
        help="the app's SQLite file (its --db; read-only)",
    )
    p.add_argument(
        "--db-dataset", help="the dataset's name in APP_DB (default: its rudder.json name)"
    )
    p.add_argument(
        "--adjudicator", action="append", default=[], metavar="NAME",
        help="an annotator whose label settles a pair (repeatable)",
    )
    p.add_argument(
        "--base-run", type=folder,
        help="a run whose config the new one starts from (default: the config defaults)",
    )
    p.add_argument(
        "--out", type=folder,
        help="the new run folder (default runs/<time>-<name>-retrained-po under --runs)",
    )
    p.add_argument(
        "--runs", type=folder, default=Path("runs"), help="folder of runs (default runs)"
    )
    p.add_argument(
        "--only-app-labels", action="store_true",
        help="train on the app's settled labels alone, not also the dataset's relations",
    )
    p.add_argument("--epochs", type=positive_int, help="the most epochs (default: the base run's)")
    p.add_argument("--seed", type=seed, help="the run's seed (default: the base run's)")
    p.add_argument(
        "--set", dest="overrides", action="append", default=[], metavar="KEY=VALUE",
        help="a further config override, as rudder.train's --set (repeatable)",
    )
    p.add_argument("--dry-run", action="store_true", help="settle and report, train nothing")
    p.set_defaults(run=commands.cmd_retrain)
    return parser


def optional_needs(args) -> list[Need]:
    """The extras a parsed command needs: Stanza for its own commands, a Stanza tagger
    (``--tagger stanza``, the default) and ``eval-classes --method tagger``."""
    stanza = (
        args.command in ("download", "train-tagger", "eval-tagger")
        or getattr(args, "tagger", None) == "stanza"
        or getattr(args, "method", None) == "tagger"
    )
    return [Need("stanza", "heuristics", f"python -m heuristics {args.command}")] if stanza else []


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        check_installed(optional_needs(args))  # before any work
        return args.run(args)
    except ERRORS as error:
        print(f"error: {one_line(error)}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    raise SystemExit(main())
