"""Effect of the not-a-word lemma fallback (:func:`heuristics.class_rules.word_lemmas`) on UD.

``python -m heuristics.studies.lemma_eval --model-dir DIR --conllu F.conllu`` tags the
gold tokens of an English treebank (converted as for training,
:func:`heuristics.stanza_training.prepare_treebank`) and scores the lemmas of the words the
tagger calls VERB or NOUN/PROPN against the gold lemmas, with the tagger's lemmas and with
the fallback (vocabulary: the file's own surface words, as ``label`` uses the captions').
It prints both accuracies and the lemmas the fallback changed, most frequent first.
"""

from __future__ import annotations

import argparse
from collections import Counter
from pathlib import Path

from ..class_rules import corpus_vocabulary, word_lemmas
from ..conllu import read_conllu
from ..nouns_verbs import NOUN_UPOS, normalise
from ..stanza_training import prepare_treebank
from ..taggers import StanzaTagger


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(prog="python -m heuristics.studies.lemma_eval")
    parser.add_argument("--model-dir", type=Path, required=True)
    parser.add_argument("--conllu", type=Path, required=True)
    args = parser.parse_args(argv)

    gold = [s.words for s in prepare_treebank(read_conllu(args.conllu), "en")]
    tagged = StanzaTagger(args.model_dir).tag_tokens([[w.form for w in s] for s in gold], "en")
    vocabulary = corpus_vocabulary(tagged, "en")
    counts, changed = Counter(), Counter()
    for gold_words, words in zip(gold, tagged):
        fixed = word_lemmas(words, "en", vocabulary)
        for g, before, after in zip(gold_words, words, fixed):
            if before.upos not in ("VERB", *NOUN_UPOS):
                continue
            old, new = normalise(before.lemma, "en"), normalise(after.lemma, "en")
            counts["words"] += 1
            counts["before"] += old == g.lemma
            counts["after"] += new == g.lemma
            if old != new:
                changed[(before.text, old, new, g.lemma)] += 1
    n = counts["words"]
    print(f"{args.conllu.name}: {n} words tagged VERB/NOUN/PROPN")
    print(
        f"lemma accuracy: tagger {100 * counts['before'] / n:.2f}%, with fallback {100 * counts['after'] / n:.2f}%"
    )
    print(f"changed {sum(changed.values())} lemmas (form, tagger, fallback, gold):")
    for key, count in changed.most_common(25):
        print(f"  {count} {key}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
