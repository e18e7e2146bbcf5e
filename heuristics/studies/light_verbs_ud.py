"""Light-verb joins (:func:`heuristics.nouns_verbs.extract`) against UD's ``compound:lvc``.

``python -m heuristics.studies.light_verbs_ud --lang hi --train TRAIN.conllu --test T.conllu``
reads the gold words of ``--test`` (gold UPOS and lemmas, the word form where a treebank
has no lemmas; relations removed, as the trained taggers have no parser) and counts the
light-verb constructions the extraction joins (``host+stem`` verbs) against the gold ones
(a ``compound:lvc`` dependent of a VERB, named the same way), without a class map (only
hi/mr कर/हो join) and with a class map that lists the constructions annotated in
``--train`` (as a lexicon listing ``साफ करना`` would). It prints precision and recall.
"""

from __future__ import annotations

from collections import Counter
from pathlib import Path
from typing import Any

from rudder.cli import ArgumentParser
from rudder.languages import check_language

from ..conllu import read_conllu
from ..nouns_verbs import LIGHT_VERBS, TaggedWord, _light_stem, extract, light_stem, normalise
from ..stanza_training import prepare_treebank
from . import run_study


def _sentences(path: Path, lang: str):
    """Gold words of ``path``: (tagged words without relations, gold ``host+stem`` names,
    the stem named as :func:`heuristics.nouns_verbs.extract` names it)."""
    out = []
    table = LIGHT_VERBS.get(lang, {})
    for sentence in prepare_treebank(read_conllu(path), lang):
        words = [
            TaggedWord(w.form, w.lemma if w.lemma not in ("_", "") else w.form, w.upos)
            for w in sentence.words
        ]
        gold = []
        for k, w in enumerate(sentence.words):
            head = (w.head or 0) - 1
            if w.deprel == "compound:lvc" and 0 <= head < len(words):
                verb = words[head]
                if verb.upos == "VERB":
                    lemma, form = normalise(verb.lemma, lang), normalise(verb.text, lang)
                    stem = light_stem(lemma, form, lang, table) or _light_stem(lemma, lang, table)
                    gold.append(f"{normalise(words[k].lemma, lang)}+{stem}")
        out.append((words, gold))
    return out


def score(sentences, lang: str, known=None) -> dict:
    counts: Counter[Any] = Counter()
    for words, gold in sentences:
        _, verbs = extract(words, lang, known_verb=known)
        joined = Counter(v for v in verbs if "+" in v)
        expected = Counter(gold)
        counts["gold"] += sum(expected.values())
        counts["joined"] += sum(joined.values())
        counts["right"] += sum((joined & expected).values())
    p = counts["right"] / counts["joined"] if counts["joined"] else None
    r = counts["right"] / counts["gold"] if counts["gold"] else None
    return {**counts, "precision": p, "recall": r}


def build_parser() -> ArgumentParser:
    parser = ArgumentParser(prog="python -m heuristics.studies.light_verbs_ud")
    parser.add_argument("--lang", required=True)
    parser.add_argument("--train", type=Path, required=True)
    parser.add_argument("--test", type=Path, required=True)
    return parser


def main(argv=None) -> int:
    return run_study(build_parser(), _run, argv)


def _run(args) -> int:
    lang = check_language(args.lang, "--lang")
    listed = {name for _, gold in _sentences(args.train, lang) for name in gold}
    test = _sentences(args.test, lang)
    pct = lambda x: "n/a" if x is None else f"{100 * x:.1f}"
    for name, known in (("no class map", None), ("class map of train", listed.__contains__)):
        s = score(test, lang, known)
        print(
            f"{lang} {args.test.name}, {name} ({len(listed)} listed): gold {s['gold']}, "
            f"joined {s['joined']}, right {s['right']}, "
            f"P {pct(s['precision'])}, R {pct(s['recall'])}"
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
