"""The Indic class-map rules on the sample dataset's captions, against its manual marks.

``python -m heuristics.studies.indic_sample --model-dir DIR [--lang mr hi ta te]
[--lexicon rudder/data/sample_lexicon.tsv]`` tags every caption of the embedded sample
dataset (all splits) in each language with the Stanza tagger of ``DIR``, extracts classes
with the lexicon as class map (:func:`heuristics.class_rules.extract_classes`, the
vocabulary of :func:`heuristics.class_rules.lemma_vocabulary`) under every rule and with
each rule left out, and prints the share of captions whose verb-class set and noun-class
set equal the manual ones (the sample's ``verb_classes``/``noun_classes``, which name
lexicon concepts only; predicted classes outside the lexicon, ``<pos>:<lang>:<lemma>``, are
dropped before comparing).
"""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

from rudder.cli import ArgumentParser, folder
from rudder.errors import RudderError
from rudder.languages import check_languages

from ..class_rules import ClassRules, extract_classes, lemma_vocabulary
from ..classes import read_lexicon
from ..taggers import StanzaTagger, TagCache, tag_texts
from . import run_study

INDIC_RULES = (
    "imperative",
    "disagreement",
    "noun_phrases",
    "lemmas",
    "light_verbs",
)  # the others are English
LEXICON = Path(__file__).resolve().parents[2] / "rudder" / "data" / "sample_lexicon.tsv"


def _captions(lang: str):
    import pyarrow.parquet as pq

    from rudder.data.sample import sample_dataset_path

    rows = []
    for path in sorted((Path(sample_dataset_path()) / "captions").glob("*.parquet")):
        table = pq.read_table(path, columns=["lang", "text", "noun_classes", "verb_classes"])
        rows += [r for r in table.to_pylist() if r["lang"] == lang]
    return rows


def _known(classes) -> frozenset:
    return frozenset(c for c in classes if not c.startswith(("noun:", "verb:")))


def score(rows, tagged, lang, class_map, rules, vocabulary) -> dict:
    verbs = nouns = both = 0
    for row, words in zip(rows, tagged, strict=False):
        _, _, noun_classes, verb_classes = extract_classes(
            words, lang, class_map, rules=rules, vocabulary=vocabulary
        )
        v = _known(verb_classes) == frozenset(row["verb_classes"] or ())
        n = _known(noun_classes) == frozenset(row["noun_classes"] or ())
        verbs, nouns, both = verbs + v, nouns + n, both + (v and n)
    pct = lambda x: round(100 * x / len(rows), 2)
    return {"verb_set": pct(verbs), "noun_set": pct(nouns), "both": pct(both)}


def build_parser() -> ArgumentParser:
    parser = ArgumentParser(prog="python -m heuristics.studies.indic_sample")
    parser.add_argument("--model-dir", type=folder, required=True)
    parser.add_argument("--lang", nargs="+", default=["mr", "hi", "ta", "te"])
    parser.add_argument("--lexicon", type=Path, default=LEXICON)
    return parser


def main(argv=None) -> int:
    return run_study(build_parser(), _run, argv)


def _run(args) -> int:
    check_languages(args.lang, "--lang")
    class_map, tagger = read_lexicon(args.lexicon), StanzaTagger(args.model_dir)
    variants = {"all rules": ClassRules(), "no rules": ClassRules.none()}
    for name in INDIC_RULES:
        variants[f"without {name}"] = replace(ClassRules(), **{name: False})
    print("| lang | captions | variant | verb set = manual | noun set = manual | both |")
    print("|---|---|---|---|---|---|")
    for lang in args.lang:
        rows = _captions(lang)
        if not rows:
            raise RudderError(f"the sample dataset has no captions in {lang!r}")
        tagged = tag_texts(tagger, [r["text"] for r in rows], lang, cache=TagCache())
        vocabulary = lemma_vocabulary(tagger, tagged, lang)
        for name, rules in variants.items():
            s = score(rows, tagged, lang, class_map, rules, vocabulary)
            print(
                f"| {lang} | {len(rows)} | {name} | {s['verb_set']} | {s['noun_set']} "
                f"| {s['both']} |"
            )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
