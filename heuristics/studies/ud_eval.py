"""Train and score a Stanza tagger per language on the UD treebanks in ../shared/data/ud.

``python -m heuristics.studies.ud_eval --ud ../shared/data/ud`` writes the train/dev/test
files it uses under ``--data`` (default ``$RUDDER_CACHE/stanza-ud/data``; mr_ufal, te_mtg,
ta_ttb: their own splits; hi_pud (test file only) and en_ewt (dev + test files,
concatenated): split by sentence position, ``i % 10`` in 0-6 train, 7 dev, 8-9 test), trains
each language with :func:`heuristics.stanza_training.train_tagger` into the model folder of
every ``heuristics`` command (``--model-dir``, else ``$STANZA_RESOURCES_DIR``, else
``~/.cache/rudder/stanza``: :func:`heuristics.taggers.model_dir`), with the
``train-tagger`` defaults unless told otherwise, scores the test part with
:func:`heuristics.evaluation.evaluate_tagger` (``python -m heuristics eval-tagger``), and
prints a Markdown table; ``--report FILE`` also writes the numbers as JSON.
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

from rudder.atomic import atomic_write_text
from rudder.cli import ArgumentParser, folder, int_in, output_file
from rudder.paths import cache_dir

from ..conllu import read_conllu, split_sentences, write_conllu
from ..evaluation import evaluate_tagger
from ..stanza_training import SIZES, TrainOptions, train_tagger
from ..taggers import StanzaTagger, model_dir
from . import run_study

OWN_SPLITS = {"mr": "mr_ufal", "te": "te_mtg", "ta": "ta_ttb"}
POSITION_SPLIT = {"train": tuple(range(7)), "dev": (7,), "test": (8, 9)}
OWN_SPLIT_SOURCES = {
    "hi": ("hi_pud-ud-test.conllu",),
    "en": ("en_ewt-ud-dev.conllu", "en_ewt-ud-test.conllu"),
}


def write_splits(ud: Path, out: Path, lang: str) -> dict[str, Path]:
    """The train/dev/test CoNLL-U files of ``lang`` (written under ``out``)."""
    if lang in OWN_SPLITS:
        name = OWN_SPLITS[lang]
        return {part: ud / f"{name}-ud-{part}.conllu" for part in ("train", "dev", "test")}
    sentences = [s for source in OWN_SPLIT_SOURCES[lang] for s in read_conllu(ud / source)]
    parts = split_sentences(sentences, POSITION_SPLIT, modulus=10)
    paths = {}
    for part, chunk in parts.items():
        paths[part] = out / f"{lang}-{part}.conllu"
        write_conllu(chunk, paths[part])
    return paths


def markdown(results: dict) -> str:
    lines = [
        (
            "| lang | train sents | test words | UPOS acc | lemma acc | noun P / R / F1 "
            "| noun F1 +lemma "
            "| verb P / R / F1 | verb F1 +lemma | train wall s (POS + lemma) | train CPU s |"
        ),
        "|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    pct = lambda x: "n/a" if x is None else f"{100 * x:.1f}"
    for lang, r in results.items():
        n, v, info = r["scores"]["noun"], r["scores"]["verb"], r["info"]
        lines.append(
            f"| {lang} | {info['train']['sentences']} | {r['scores']['words']} "
            f"| {pct(r['scores']['upos_accuracy'])} | {pct(r['scores']['lemma_accuracy'])} "
            f"| {pct(n['precision'])} / {pct(n['recall'])} / {pct(n['f1'])} "
            f"| {pct(n['f1_with_lemma'])} "
            f"| {pct(v['precision'])} / {pct(v['recall'])} / {pct(v['f1'])} "
            f"| {pct(v['f1_with_lemma'])} "
            f"| {info['seconds']['pos']:.0f} + {info['seconds']['lemma']:.0f} "
            f"| {sum(info.get('cpu_seconds', {}).values()):.0f} |"
        )
    return "\n".join(lines)


positive_int = int_in(1, 10**9)  # steps, as python -m heuristics train-tagger


def build_parser() -> ArgumentParser:
    parser = ArgumentParser(
        prog="python -m heuristics.studies.ud_eval",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument(
        "--ud", type=folder, default=Path(__file__).resolve().parents[3] / "shared" / "data" / "ud"
    )
    parser.add_argument(
        "--data",
        type=folder,
        default=cache_dir("stanza-ud", "data"),
        help="where the hi/en splits are written",
    )
    parser.add_argument("--model-dir", type=folder, help="default as for python -m heuristics")
    parser.add_argument(
        "--lang",
        nargs="+",
        choices=[*OWN_SPLITS, *OWN_SPLIT_SOURCES],
        default=["mr", "te", "ta", "hi", "en"],
        help="languages with a UD treebank split here",
    )
    parser.add_argument("--size", choices=sorted(SIZES), default=TrainOptions.size)
    parser.add_argument("--max-steps", type=positive_int, default=TrainOptions.max_steps)
    parser.add_argument("--eval-interval", type=positive_int, default=TrainOptions.eval_interval)
    parser.add_argument("--lemma-steps", type=positive_int, default=TrainOptions.lemma_steps)
    parser.add_argument("--report", type=output_file)
    return parser


def main(argv=None) -> int:
    return run_study(build_parser(), _run, argv)


def _run(args) -> int:
    options = TrainOptions(
        size=args.size,
        max_steps=args.max_steps,
        eval_interval=args.eval_interval,
        lemma_steps=args.lemma_steps,
    )
    models = model_dir(args.model_dir)
    results = {}
    for lang in args.lang:
        paths = write_splits(args.ud, args.data, lang)
        print(
            f"[{lang}] python -m heuristics train-tagger --lang {lang} "
            f"--train {paths['train']} --dev {paths['dev']} "
            f"--model-dir {models} --size {options.size} --max-steps {options.max_steps} "
            f"--eval-interval {options.eval_interval} --lemma-steps {options.lemma_steps}",
            flush=True,
        )
        start = time.perf_counter()
        info = train_tagger(lang, paths["train"], paths["dev"], models, options)
        print(
            f"[{lang}] trained in {time.perf_counter() - start:.0f} s; "
            f"python -m heuristics eval-tagger --lang {lang} --conllu {paths['test']} "
            f"--model-dir {models}",
            flush=True,
        )
        scores = evaluate_tagger(StanzaTagger(models), paths["test"], lang)
        results[lang] = {"info": info, "scores": scores, "test": str(paths["test"])}
        print(markdown({lang: results[lang]}).splitlines()[-1], flush=True)
        if args.report:
            args.report.parent.mkdir(parents=True, exist_ok=True)
            atomic_write_text(args.report, json.dumps(results, indent=2, ensure_ascii=False))
    print(markdown(results))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
