"""Effect of the not-a-word lemma fallback (:func:`heuristics.class_rules.word_lemmas`) on UD.

``python -m heuristics.studies.lemma_eval --model-dir DIR --conllu F.conllu [--lang mr]``
tags the gold tokens of a treebank (converted as for training,
:func:`heuristics.stanza_training.prepare_treebank`) and scores the lemmas of the words the
tagger calls VERB or NOUN/PROPN against the gold lemmas, with the tagger's lemmas and with
the fallback. What counts as a word is what ``label`` uses
(:func:`heuristics.class_rules.lemma_vocabulary`): for English the file's own surface words
(as ``label`` uses the captions'), for mr/hi/ta/te the lemmas of the tagger's training
treebank (``DIR/<lang>/lemmas.txt``). It prints both accuracies and the lemmas the fallback
changed, most frequent first.
"""

from __future__ import annotations

from collections import Counter
from pathlib import Path
from typing import Any

from rudder.cli import ArgumentParser, folder
from rudder.errors import RudderError
from rudder.languages import check_language

from ..class_rules import lemma_vocabulary, word_lemmas
from ..conllu import read_conllu
from ..nouns_verbs import NOUN_UPOS, normalise
from ..stanza_training import prepare_treebank
from ..taggers import StanzaTagger
from . import run_study


def build_parser() -> ArgumentParser:
    parser = ArgumentParser(prog="python -m heuristics.studies.lemma_eval")
    parser.add_argument("--model-dir", type=folder, required=True)
    parser.add_argument("--conllu", type=Path, required=True)
    parser.add_argument("--lang", default="en")
    return parser


def main(argv=None) -> int:
    return run_study(build_parser(), _run, argv)


def _run(args) -> int:
    lang = check_language(args.lang, "--lang")
    gold = [s.words for s in prepare_treebank(read_conllu(args.conllu), lang)]
    tagger = StanzaTagger(args.model_dir)
    tagged = tagger.tag_tokens([[w.form for w in s] for s in gold], lang)
    vocabulary = lemma_vocabulary(tagger, tagged, lang)
    counts: Counter[Any] = Counter()
    changed: Counter[Any] = Counter()
    for gold_words, words in zip(gold, tagged, strict=False):
        fixed = word_lemmas(words, lang, vocabulary)
        for g, before, after in zip(gold_words, words, fixed, strict=False):
            if before.upos not in ("VERB", *NOUN_UPOS):
                continue
            old, new = normalise(before.lemma, lang), normalise(after.lemma, lang)
            counts["words"] += 1
            counts["before"] += old == g.lemma
            counts["after"] += new == g.lemma
            if old != new:
                changed[(before.text, old, new, g.lemma)] += 1
    n = counts["words"]
    if n == 0:
        raise RudderError(f"{args.conllu}: no words the tagger calls VERB, NOUN or PROPN")
    print(f"{args.conllu.name}: {n} words tagged VERB/NOUN/PROPN; {len(vocabulary)} known words")
    print(
        f"lemma accuracy: tagger {100 * counts['before'] / n:.2f}%, "
        f"with fallback {100 * counts['after'] / n:.2f}%"
    )
    fixed_count = sum(c for (_, old, new, gold_lemma), c in changed.items() if new == gold_lemma)
    broken = sum(c for (_, old, new, gold_lemma), c in changed.items() if old == gold_lemma)
    print(
        f"changed {sum(changed.values())} lemmas ({fixed_count} now right, {broken} now wrong; "
        "form, tagger, fallback, gold):"
    )
    for key, count in changed.most_common(25):
        print(f"  {count} {key}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
