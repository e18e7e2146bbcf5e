"""The implementations of ``python -m heuristics``'s commands (the parser is in ``__main__``)."""

from __future__ import annotations

import json
from pathlib import Path

from rudder.atomic import atomic_write_text
from rudder.languages import SUPPORTED

from .classes import (
    ClassMap,
    lexicon_entries,
    read_epic_classes,
    read_lexicon,
)
from .stanza_training import TrainOptions
from .stop_nouns import load_stop_nouns
from .taggers import MODEL_INFO, TaggerError, model_dir
from .text_files import read_text


def _write_report(path, data) -> None:
    if path is None:
        return
    atomic_write_text(path, json.dumps(data, indent=2, ensure_ascii=False) + "\n")


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
            "the lexicon tagger has no words: pass --lexicon FILE or label a dataset whose "
            "captions have nouns/verbs columns"
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
            rows += [r for r in zip(*columns, strict=True) if r[2] or r[3]]
    return rows


def cmd_download(args) -> int:
    from .download import download_models

    target = model_dir(args.model_dir)
    download_models(args.lang, target, timeout=args.timeout, overwrite=args.overwrite)
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
        f"trained {args.lang} POS ({info['seconds']['pos']} s) and lemmatizer "
        f"({info['seconds']['lemma']} s) "
        f"on {info['train']['sentences']} sentences into {Path(out) / args.lang}"
    )
    return 0


def _model_and_lang(model: Path, lang: str | None) -> tuple[Path, str]:
    """The model folder and language of eval-tagger's ``--model-dir``: a folder of languages,
    or one language's folder (train-tagger's, or an official one beside ``resources.json``)."""
    official = (model.parent / "resources.json").is_file() and (model / "pos").is_dir()
    if (model / MODEL_INFO).is_file() or (official and model.name in SUPPORTED):
        return model.parent, lang or model.name
    if lang:
        return model, lang
    found = [code for code in SUPPORTED if (model / code / "pos").is_dir()]
    if len(found) != 1:
        raise TaggerError(f"{model}: holds models for {found or 'no language'}; pass --lang")
    return model, found[0]


def cmd_eval_tagger(args) -> int:
    from .conllu import read_conllu
    from .evaluation import evaluate_tagger
    from .taggers import StanzaTagger

    sentences = read_conllu(args.conllu)  # a bad file is refused before models are looked for
    folder, lang = _model_and_lang(model_dir(args.model_dir), args.lang)
    result = evaluate_tagger(StanzaTagger(folder), sentences, lang)
    pct = lambda x: "n/a (no gold lemmas)" if x is None else f"{100 * x:.1f}"
    print(f"{lang}: {result['sentences']} sentences, {result['words']} words")
    print(
        f"UPOS accuracy {pct(result['upos_accuracy'])}  "
        f"lemma accuracy {pct(result['lemma_accuracy'])}"
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
    from .class_rules import extract_classes, lemma_vocabulary
    from .taggers import tag_texts

    texts = list(args.text)
    if args.input:
        texts += [
            line.rstrip("\n")
            for line in read_text(args.input, TaggerError).splitlines()
            if line.strip()
        ]
    if not texts:
        raise TaggerError("nothing to tag: give texts or --input FILE")
    class_map, options = _class_map(args), _options(args)  # files before the tagger's models
    tagger = _build_tagger(args, _annotated_captions(args.dataset) if args.dataset else ())
    tagged = tag_texts(tagger, texts, args.lang, cache=_cache(args))
    vocabulary = lemma_vocabulary(tagger, tagged, args.lang)  # as label: the lemma fallback
    for text, words in zip(texts, tagged, strict=False):
        nouns, verbs, noun_classes, verb_classes = extract_classes(
            words, args.lang, class_map, options, vocabulary=vocabulary
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

    class_map = _class_map(args)  # the class files are read before the tagger's models
    stop_nouns = load_stop_nouns(args.stop_nouns, not args.no_stop_nouns)
    tagger = _build_tagger(
        args, _annotated_captions(args.dataset) if args.tagger == "lexicon" else ()
    )
    config = LabelConfig(
        alpha_n=args.alpha_n,
        alpha_v=args.alpha_v,
        options=_options(args),
        stats_queries=args.stats_queries,
        num_proc=args.num_proc,
        stop_nouns=stop_nouns,
        sample_pairs=args.sample_pairs,
        seed=args.seed,
        langs=args.langs,
    )
    stats = label_dataset(
        args.dataset,
        tagger,
        class_map,
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
        covered_videos,
        read_video_sets,
        video_relations,
        write_relations,
    )

    sets = read_video_sets(args.sets)
    found, total = covered_videos(args.dataset, sets, args.sets)
    print(f"{found} of the dataset's {total} captioned videos are in {args.sets}")
    table = video_relations(args.dataset, sets, args.alpha_o, args.alpha_a)
    counts = {
        k: int((table.column("label").to_numpy() == v).sum())
        for k, v in (("partial", 1), ("positive", 2))
    }
    print(f"{table.num_rows} caption-pair relations from the video heuristic: {counts}")
    if not args.dry_run:
        write_relations(args.dataset, table, replace_annotator=VIDEO_ANNOTATOR)
    return 0


def cmd_import_relations(args) -> int:
    from rudder.data.layout import DatasetFolder

    from .relations import caption_ids, read_manual, write_relations

    name = DatasetFolder(args.dataset).meta.name
    table, skipped = read_manual(args.files, caption_ids(args.dataset), args.annotator, name)
    print(f"{table.num_rows} manual relations read from {len(args.files)} file(s)")
    if skipped:
        print(f"{skipped} record(s) of datasets other than {name!r} skipped")
    if not args.dry_run:
        merged = write_relations(args.dataset, table, rule=args.resolve)
        print(f"the dataset now has {merged.num_rows} relations")
    return 0


def cmd_retrain(args) -> int:
    from rudder.runs.folders import default_run_dir

    from .retrain import retrain

    out = args.out or default_run_dir(f"{_run_name(args)}-retrained-po", root=args.runs)
    record = retrain(args.dataset, args.from_labels, out, base_run=args.base_run,
                     db_dataset=args.db_dataset, adjudicators=args.adjudicator,
                     only_app_labels=args.only_app_labels, epochs=args.epochs, seed=args.seed,
                     overrides=args.overrides, dry_run=args.dry_run)
    how = ", ".join(f"{count} {name}" for name, count in record["settled"].items() if count)
    print(f"{record['labels']} settled labels of {record['dataset']!r} ({how}; "
          f"{record['unsettled']} pair(s) unsettled) from {len(record['annotators'])} "
          f"annotator(s), labelled {record['first_label']} to {record['last_label']}; "
          f"{record['in_training_split']} of them pair training captions")
    print(f"relations to train on: {record['relations']} ({record['dataset_relations_kept']} "
          "of them the dataset's own)")
    if not args.dry_run:
        print(f"retrained run: {out}")
    return 0


def _run_name(args) -> str:
    """The base run's name (for the default run folder), else the dataset's."""
    from rudder.runs.layout import config_file, read_config

    if args.base_run is not None and config_file(args.base_run).is_file():
        return str(read_config(args.base_run).get("name") or "ce")
    return Path(args.dataset).name or "ce"
