"""``python -m heuristics <command>``: taggers, noun/verb columns and relations for a dataset."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from rudder.atomic import atomic_write_text
from rudder.data.layout import LayoutError
from rudder.errors import RudderError, one_line
from rudder.languages import SUPPORTED, UnsupportedLanguageError

from .classes import (
    ClassFileError,
    ClassMap,
    lexicon_entries,
    read_epic_classes,
    read_lexicon,
)
from .conllu import ConlluError
from .download import DownloadError
from .label import LabelError
from .relations import RelationError
from .stanza_training import SIZES, TrainingError, TrainOptions
from .stop_nouns import StopNounError, load_stop_nouns
from .taggers import MODEL_INFO, TaggerError, model_dir

ERRORS = (
    ConlluError,
    ClassFileError,
    DownloadError,
    LabelError,
    RelationError,
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


def _write_report(path, data) -> None:
    if path is None:
        return
    atomic_write_text(path, json.dumps(data, indent=2, ensure_ascii=False) + "\n")


def _tagger_args(parser) -> None:
    parser.add_argument("--tagger", choices=("stanza", "lexicon"), default="stanza")
    parser.add_argument("--model-dir", type=Path, help=MODEL_DIR_HELP)
    parser.add_argument(
        "--lexicon",
        type=Path,
        action="append",
        default=[],
        help="lexicon TSV concept_id,pos,lang,lemma (repeatable): classes, and words for --tagger lexicon",
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


def _options(args):
    from .nouns_verbs import ExtractionOptions

    return ExtractionOptions(
        phrasal_verbs=not args.no_phrasal_verbs,
        light_verbs=not args.no_light_verbs,
        noun_compounds=() if args.no_noun_compounds else ("en",),
    )


def _class_map(args) -> ClassMap:
    out = ClassMap()
    for path in getattr(args, "noun_classes", None) or []:
        out.update(read_epic_classes(path, "noun"))
    for path in getattr(args, "verb_classes", None) or []:
        out.update(read_epic_classes(path, "verb"))
    for path in args.lexicon:
        out.update(read_lexicon(path))
    return out


def _build_tagger(args, captions=()):
    from .lexicon_tagger import LexiconTagger
    from .taggers import StanzaTagger

    if args.tagger == "stanza":
        return StanzaTagger(args.model_dir)
    entries = [e for path in args.lexicon for e in lexicon_entries(read_lexicon(path))]
    tagger = LexiconTagger(entries, captions)
    if not tagger.lemmas:
        raise TaggerError(
            "the lexicon tagger has no words: pass --lexicon FILE or label a dataset whose captions "
            "have nouns/verbs columns"
        )
    return tagger


def _cache(args):
    from .taggers import TagCache

    return None if args.no_cache else TagCache(args.cache)


def _annotated_captions(root):
    """(lang, text, nouns, verbs) of captions with manual nouns/verbs, for the lexicon tagger."""
    from rudder.data.layout import DatasetFolder

    from .label import caption_tables

    rows = []
    for table in caption_tables(DatasetFolder(root)).values():
        if "nouns" in table.column_names and "verbs" in table.column_names:
            columns = [table.column(c).to_pylist() for c in ("lang", "text", "nouns", "verbs")]
            rows += [r for r in zip(*columns) if r[2] or r[3]]
    return rows


def cmd_download(args) -> int:
    from .download import download_models

    target = model_dir(args.model_dir)
    download_models(args.lang, target, timeout=args.timeout)
    print(f"downloaded Stanza models for {' '.join(args.lang)} into {target}")
    return 0


def cmd_train_tagger(args) -> int:
    from .stanza_training import train_tagger

    options = TrainOptions(
        size=args.size,
        max_steps=args.max_steps,
        batch_size=args.batch_size,
        eval_interval=args.eval_interval,
        lemma_steps=args.lemma_steps,
        seed=args.seed,
    )
    out = model_dir(args.model_dir)
    info = train_tagger(
        args.lang,
        args.train,
        args.dev,
        out,
        options,
        verbose=args.verbose,
        progress=not args.quiet,
    )
    print(
        f"trained {args.lang} POS ({info['seconds']['pos']} s) and lemmatizer ({info['seconds']['lemma']} s) "
        f"on {info['train']['sentences']} sentences into {Path(out) / args.lang}"
    )
    return 0


def _model_and_lang(model: Path, lang: str | None) -> tuple[Path, str]:
    if (model / MODEL_INFO).is_file():
        return model.parent, lang or model.name
    if lang:
        return model, lang
    found = [code for code in SUPPORTED if (model / code / "pos").is_dir()]
    if len(found) != 1:
        raise TaggerError(f"{model}: holds models for {found or 'no language'}; pass --lang")
    return model, found[0]


def cmd_eval_tagger(args) -> int:
    from .evaluation import evaluate_tagger
    from .taggers import StanzaTagger

    folder, lang = _model_and_lang(model_dir(args.model_dir), args.lang)
    result = evaluate_tagger(StanzaTagger(folder), args.conllu, lang)
    pct = lambda x: "n/a (no gold lemmas)" if x is None else f"{100 * x:.1f}"
    print(f"{lang}: {result['sentences']} sentences, {result['words']} words")
    print(
        f"UPOS accuracy {pct(result['upos_accuracy'])}  lemma accuracy {pct(result['lemma_accuracy'])}"
    )
    for name in ("noun", "verb"):
        r = result[name]
        print(
            f"{name}: P {pct(r['precision'])}  R {pct(r['recall'])}  F1 {pct(r['f1'])}  "
            f"F1 with lemma {pct(r['f1_with_lemma'])}"
        )
    _write_report(args.report, {"lang": lang, "conllu": str(args.conllu), **result})
    return 0


def cmd_tag(args) -> int:
    from .class_rules import extract_classes
    from .taggers import tag_texts

    texts = list(args.text)
    if args.input:
        texts += [
            line.rstrip("\n")
            for line in Path(args.input).read_text(encoding="utf-8").splitlines()
            if line.strip()
        ]
    if not texts:
        raise TaggerError("nothing to tag: give texts or --input FILE")
    tagger = _build_tagger(args, _annotated_captions(args.dataset) if args.dataset else ())
    class_map, options = _class_map(args), _options(args)
    for text, words in zip(texts, tag_texts(tagger, texts, args.lang, cache=_cache(args))):
        nouns, verbs, noun_classes, verb_classes = extract_classes(
            words, args.lang, class_map, options
        )
        print(
            json.dumps(
                {
                    "text": text,
                    "words": [[w.text, w.lemma, w.upos] for w in words],
                    "nouns": nouns,
                    "verbs": verbs,
                    "noun_classes": noun_classes,
                    "verb_classes": verb_classes,
                },
                ensure_ascii=False,
            )
        )
    return 0


def cmd_label(args) -> int:
    from .label import LabelConfig, format_statistics, label_dataset

    tagger = _build_tagger(
        args, _annotated_captions(args.dataset) if args.tagger == "lexicon" else ()
    )
    config = LabelConfig(
        alpha_n=args.alpha_n,
        alpha_v=args.alpha_v,
        options=_options(args),
        stats_queries=args.stats_queries,
        num_proc=args.num_proc,
        stop_nouns=load_stop_nouns(args.stop_nouns, not args.no_stop_nouns),
        sample_pairs=args.sample_pairs,
        seed=args.seed,
        langs=args.langs,
    )
    stats = label_dataset(
        args.dataset,
        tagger,
        _class_map(args),
        config,
        dry_run=args.dry_run,
        overwrite=args.overwrite,
        cache=_cache(args),
    )
    print(format_statistics(stats))
    print(
        "dry run: the dataset was not changed"
        if args.dry_run
        else f"labelled the captions of {args.dataset}"
    )
    _write_report(
        args.report,
        {
            "dataset": str(args.dataset),
            "alpha_n": args.alpha_n,
            "alpha_v": args.alpha_v,
            "tagger": args.tagger,
            "statistics": stats,
        },
    )
    return 0


def cmd_video_relations(args) -> int:
    from .relations import (
        VIDEO_ANNOTATOR,
        read_video_sets,
        video_relations,
        write_relations,
    )

    table = video_relations(args.dataset, read_video_sets(args.sets), args.alpha_o, args.alpha_a)
    counts = {
        k: int((table.column("label").to_numpy() == v).sum())
        for k, v in (("partial", 1), ("positive", 2))
    }
    print(f"{table.num_rows} caption-pair relations from the video heuristic: {counts}")
    if not args.dry_run:
        write_relations(args.dataset, table, replace_annotator=VIDEO_ANNOTATOR)
    return 0


def cmd_import_relations(args) -> int:
    from .relations import caption_ids, read_manual, write_relations

    table = read_manual(args.files, caption_ids(args.dataset), args.annotator)
    print(f"{table.num_rows} manual relations read from {len(args.files)} file(s)")
    if not args.dry_run:
        merged = write_relations(args.dataset, table)
        print(f"the dataset now has {merged.num_rows} relations")
    return 0


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m heuristics", description=__doc__)
    sub = parser.add_subparsers(dest="command", required=True)

    p = sub.add_parser("download", help="fetch Stanza's official models (needs a network)")
    p.add_argument("--lang", nargs="+", required=True)
    p.add_argument("--model-dir", type=Path, help=MODEL_DIR_HELP)
    p.add_argument("--timeout", type=float, default=5.0)
    p.set_defaults(run=cmd_download)

    p = sub.add_parser("train-tagger", help="train Stanza POS + lemmatizer offline from CoNLL-U")
    p.add_argument("--lang", required=True)
    p.add_argument("--train", type=Path, required=True)
    p.add_argument("--dev", type=Path, required=True)
    p.add_argument("--model-dir", "--out", type=Path, help=MODEL_DIR_HELP)
    p.add_argument("--size", choices=sorted(SIZES), default=TrainOptions.size)
    p.add_argument("--max-steps", type=int, default=TrainOptions.max_steps)
    p.add_argument("--batch-size", type=int, default=TrainOptions.batch_size)
    p.add_argument(
        "--eval-interval",
        type=int,
        default=TrainOptions.eval_interval,
        help="steps between dev scores",
    )
    p.add_argument("--lemma-steps", type=int, default=TrainOptions.lemma_steps)
    p.add_argument("--seed", type=int, default=TrainOptions.seed)
    p.add_argument("--verbose", action="store_true", help="show Stanza's whole training log")
    p.add_argument("--quiet", action="store_true", help="no progress lines (steps, loss, dev)")
    p.set_defaults(run=cmd_train_tagger)

    p = sub.add_parser(
        "eval-tagger", help="UPOS/lemma accuracy and noun/verb P/R/F1 on a CoNLL-U file"
    )
    p.add_argument("--conllu", type=Path, required=True)
    p.add_argument(
        "--model-dir", "--model", type=Path, help=MODEL_DIR_HELP + "; or its <lang> folder"
    )
    p.add_argument("--lang", help="needed when the directory holds several languages")
    p.add_argument("--report", type=Path, help="also write the scores as JSON")
    p.set_defaults(run=cmd_eval_tagger)

    p = sub.add_parser(
        "tag", help="tag texts and print words, nouns, verbs and classes as JSON lines"
    )
    p.add_argument("text", nargs="*")
    p.add_argument("--lang", required=True)
    p.add_argument("--input", type=Path, help="one text per line")
    p.add_argument(
        "--dataset", type=Path, help="captions with nouns/verbs to build the lexicon tagger from"
    )
    p.add_argument(
        "--noun-classes", type=Path, action="append", help="EPIC-KITCHENS-100 noun class CSV"
    )
    p.add_argument(
        "--verb-classes", type=Path, action="append", help="EPIC-KITCHENS-100 verb class CSV"
    )
    _tagger_args(p)
    p.set_defaults(run=cmd_tag)

    p = sub.add_parser(
        "label", help="add nouns/verbs/noun_classes/verb_classes to a dataset's captions"
    )
    p.add_argument("--dataset", type=Path, required=True)
    p.add_argument("--alpha-n", type=float, default=0.5)
    p.add_argument("--alpha-v", type=float, default=0.5)
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
    p.add_argument("--num-proc", type=int, default=1, help="tagging processes (datasets.map)")
    p.add_argument(
        "--stats-queries", type=int, default=5000, help="queries per split for the statistics"
    )
    p.add_argument(
        "--langs", nargs="+", help="label only captions in these languages (default: all)"
    )
    p.add_argument(
        "--sample-pairs", type=int, default=0, help="print N random labelled pairs per split"
    )
    p.add_argument("--seed", type=int, default=0, help="seed of --sample-pairs")
    p.add_argument("--report", type=Path, help="also write the statistics as JSON")
    p.add_argument(
        "--stop-nouns", type=Path, help="TSV lang<TAB>lemma of subject nouns not counted"
    )
    p.add_argument("--no-stop-nouns", action="store_true", help="count every noun")
    _tagger_args(p)
    p.set_defaults(run=cmd_label)

    from . import eval_classes

    p = sub.add_parser(
        "eval-classes", help="verb/noun class accuracy of extraction on EPIC-format sentences"
    )
    eval_classes.add_arguments(p)
    p.set_defaults(run=eval_classes.run)

    p = sub.add_parser("video-relations", help="RUDDER's video-based heuristic -> relations")
    p.add_argument("--dataset", type=Path, required=True)
    p.add_argument(
        "--sets", type=Path, required=True, help="CSV video_id,objects,actions (or Charades' CSV)"
    )
    p.add_argument("--alpha-o", type=float, default=0.5)
    p.add_argument("--alpha-a", type=float, default=0.5)
    p.add_argument("--dry-run", action="store_true")
    p.set_defaults(run=cmd_video_relations)

    p = sub.add_parser(
        "import-relations", help="import manual relations (app export .jsonl or .csv)"
    )
    p.add_argument("--dataset", type=Path, required=True)
    p.add_argument("files", type=Path, nargs="+")
    p.add_argument("--annotator", default="manual", help="annotator of rows that name none")
    p.add_argument("--dry-run", action="store_true")
    p.set_defaults(run=cmd_import_relations)
    return parser


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        return args.run(args)
    except ERRORS as error:
        print(f"error: {one_line(error)}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    raise SystemExit(main())
