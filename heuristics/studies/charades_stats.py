"""Charades-STA captions: partial-label statistics with and without the subject stop-list.

``python -m heuristics.studies.charades_stats --model-dir DIR [--file F]`` tags the
captions of ``charades_sta_test.txt`` (``VIDEOID start end##sentence``) with the English
Stanza tagger, extracts nouns and verbs with the rules of :mod:`heuristics.class_rules`
(no class map: every lemma is its own class; the not-a-word lemma fallback on), and prints
``label``'s per-query statistics (:func:`heuristics.label.query_statistics`, alpha_n =
alpha_v = 0.5) with the default stop-list and with none, the share of captions that name
a stop-listed subject, that have no verb, and the lemmas the fallback changed.
"""

from __future__ import annotations

from collections import Counter
from pathlib import Path
from typing import Any

from rudder.cli import ArgumentParser, folder
from rudder.errors import RudderError

from ..class_rules import corpus_vocabulary, extract_classes, word_lemmas
from ..classes import ClassMap
from ..label import format_statistics, query_statistics
from ..stop_nouns import counted_nouns, default_stop_nouns
from ..taggers import StanzaTagger, TagCache, tag_texts
from ..text_files import read_text
from . import run_study

FILE = Path(__file__).resolve().parents[3] / "shared/data/charades_sta/charades_sta_test.txt"


def build_parser() -> ArgumentParser:
    parser = ArgumentParser(prog="python -m heuristics.studies.charades_stats")
    parser.add_argument("--model-dir", type=folder, required=True)
    parser.add_argument("--file", type=Path, default=FILE)
    return parser


def main(argv=None) -> int:
    return run_study(build_parser(), _run, argv)


def _run(args) -> int:
    if not args.file.is_file():
        raise RudderError(f"{args.file}: no such Charades-STA caption file")
    lines = read_text(args.file, RudderError).splitlines()
    texts = [line.split("##", 1)[1] for line in lines if "##" in line]
    if not texts:
        raise RudderError(f"{args.file}: no caption lines 'VIDEOID start end##sentence'")
    tagged = tag_texts(StanzaTagger(args.model_dir), texts, "en", cache=TagCache())
    vocabulary = corpus_vocabulary(tagged, "en")
    classes, stop = ClassMap(), default_stop_nouns()
    nouns, verb_classes = [], []
    changed: Counter[Any] = Counter()
    for words in tagged:
        n, _, _, v = extract_classes(words, "en", classes, vocabulary=vocabulary)
        nouns.append(n)
        verb_classes.append(v)
        for before, after in zip(words, word_lemmas(words, "en", vocabulary), strict=False):
            if before.lemma != after.lemma:
                changed[(before.text, before.lemma, after.lemma)] += 1
    stats = {}
    for name, stop_list in (("stop-list", stop), ("no stop-list", {})):
        noun_classes = [
            classes.classes("noun", "en", counted_nouns(n, "en", stop_list)) for n in nouns
        ]
        stats[f"test, {name}"] = query_statistics(noun_classes, verb_classes, 0.5, 0.5)
        stats[f"test, {name}"]["captions_with_stop_nouns"] = sum(
            len(counted_nouns(n, "en", stop_list)) < len(n) for n in nouns
        )
    print(format_statistics(stats))
    print(f"{len(texts)} captions; without a verb: {sum(not v for v in verb_classes)}")
    print("lemmas changed by the not-a-word fallback:", changed.most_common(12))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
