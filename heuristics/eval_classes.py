"""Extracted classes against gold ones: ``python -m heuristics eval-classes``.

Reads sentences in the EPIC-KITCHENS-100 retrieval-sentence format
(``narration_id,narration,verb_class,noun_classes,verb,nouns``); only ``narration`` is
input, ``verb_class`` and ``noun_classes`` are what is scored (``verb``/``nouns`` are never
read). Two methods:

- ``tagger``: rudder's tokeniser, a Stanza tagger, the class-map rules of
  :mod:`heuristics.class_rules` (each can be turned off with ``--without``) and the class
  CSVs with back-off; the predicted verb class is the first of ``verb_classes``.
- ``lookup`` (the baseline): every class instance as a phrase (``tap:water`` -> "water
  tap", ``pick-up`` -> "pick up"), matched longest-first left to right on the tokens, no
  morphology; while no verb has been found, a verb phrase at a position wins over any noun
  phrase starting there (so the noun instance ``cupboard:open``, "open cupboard", does not
  swallow the verb of "open cupboard"; ``--lookup-nouns-first``
  lets noun phrases win instead).

Scores (:func:`scores` returns fractions; the command prints percent, in its text and in its
``--json`` object alike): ``verb_class_accuracy`` (predicted verb class ==
gold), ``noun_set_accuracy`` (predicted noun class set == gold set), ``both_accuracy``,
``noun_jaccard`` (mean Jaccard of the noun class sets, 1 when both are empty).
"""

from __future__ import annotations

import ast
import csv
import json
from dataclasses import fields, replace
from pathlib import Path

from rudder.cli import folder

from .class_rules import (
    ClassRules,
    corpus_vocabulary,
    extract_classes,
    main_verb_class,
)
from .classes import ClassFileError, read_epic_classes
from .text_files import open_text

COLUMNS = ("narration_id", "narration", "verb_class", "noun_classes")


def read_sentences(path) -> list[dict]:
    """Rows with ``narration``, ``verb_class`` (str) and ``noun_classes`` (set of str)."""
    path = Path(path)
    if not path.is_file():
        raise ClassFileError(f"{path}: no such sentence CSV")
    rows = []
    with open_text(path, ClassFileError, newline="") as handle:
        reader = csv.DictReader(handle)
        missing = [c for c in COLUMNS if c not in (reader.fieldnames or ())]
        if missing:
            raise ClassFileError(
                f"{path}:1: missing columns {missing}; expected the EPIC retrieval-sentence header "
                "narration_id,narration,verb_class,noun_classes,verb,nouns"
            )
        for row in reader:
            try:
                nouns = ast.literal_eval(row["noun_classes"])
                verb = int(row["verb_class"])
                if not isinstance(nouns, (list, tuple)):
                    raise TypeError(nouns)
            except (ValueError, SyntaxError, TypeError):
                raise ClassFileError(
                    f"{path}:{reader.line_num}: verb_class must be an integer and noun_classes "
                    f"a list like [3, 8], got {row['verb_class']!r} and {row['noun_classes']!r}"
                ) from None
            if not (row["narration"] or "").strip():
                raise ClassFileError(f"{path}:{reader.line_num}: empty narration")
            rows.append(
                {
                    "id": row["narration_id"],
                    "line": reader.line_num,
                    "narration": row["narration"],
                    "verb_class": str(verb),
                    "noun_classes": {str(n) for n in nouns},
                }
            )
    if not rows:
        raise ClassFileError(f"{path}: no sentences")
    return rows


def phrases(class_map) -> dict[tuple[str, ...], dict[str, str]]:
    """Token tuple of every instance phrase -> {pos: class id}."""
    from rudder.text import tokenize

    out: dict[tuple[str, ...], dict[str, str]] = {}
    for (pos, lang, lemma), concept in class_map.entries.items():
        if pos == "noun":
            head, *mods = lemma.split(":")
            phrase = " ".join(mods + [head])
        else:
            phrase = lemma.replace("-", " ")
        out.setdefault(tuple(tokenize(phrase, lang)), {}).setdefault(pos, concept)
    return out


def lookup(
    tokens, table: dict, verbs_first: bool = True, longest: int | None = None
) -> tuple[str | None, set[str]]:
    """(verb class, noun classes) by longest-match phrase lookup (module docstring);
    ``longest`` is the longest phrase of ``table`` (computed when not given)."""
    longest = longest if longest is not None else max(map(len, table), default=0)
    verb, nouns, i = None, set(), 0
    while i < len(tokens):
        widths = range(min(longest, len(tokens) - i), 0, -1)
        hits = [
            (w, table[tuple(tokens[i : i + w])])
            for w in widths
            if tuple(tokens[i : i + w]) in table
        ]
        if verbs_first and verb is None:
            hits = [h for h in hits if "verb" in h[1]] or hits
        if not hits:
            i += 1
            continue
        width, hit = hits[0]
        if "verb" in hit and (verb is None or "noun" not in hit):
            verb = hit["verb"] if verb is None else verb
        else:
            nouns.add(hit["noun"])
        i += width
    return verb, nouns


def scores(predicted, gold) -> dict:
    """Accuracies of ``predicted`` (verb class, noun class set) pairs against ``gold`` ones."""
    n = len(gold)
    if n == 0:
        raise ValueError("no rows to score")
    pairs = list(zip(predicted, gold, strict=False))
    verb = sum(p[0] == g[0] for p, g in pairs)
    nouns = sum(p[1] == g[1] for p, g in pairs)
    both = sum(p[0] == g[0] and p[1] == g[1] for p, g in pairs)
    jaccard = sum(len(p[1] & g[1]) / len(p[1] | g[1]) if p[1] | g[1] else 1.0 for p, g in pairs)
    return {
        "rows": n,
        "verb_class_accuracy": verb / n,
        "noun_set_accuracy": nouns / n,
        "both_accuracy": both / n,
        "noun_jaccard": jaccard / n,
    }


def predict_lookup(texts, class_map, verbs_first: bool = True):
    from rudder.text import tokenize

    table = phrases(class_map)
    longest = max(map(len, table), default=0)
    return [lookup(tokenize(t, "en"), table, verbs_first, longest) for t in texts]


def predict_tagged(tagged, class_map, rules: ClassRules):
    out, vocabulary = [], corpus_vocabulary(tagged, "en")
    for words in tagged:
        _, _, noun_classes, verb_classes = extract_classes(
            words, "en", class_map, rules=rules, vocabulary=vocabulary
        )
        out.append((main_verb_class(verb_classes, rules), set(noun_classes)))
    return out


def load_classes(noun_csv, verb_csv):
    classes = read_epic_classes(noun_csv, "noun")
    return classes.update(read_epic_classes(verb_csv, "verb"))


def tag(texts, model_dir, cache=True):
    from .taggers import StanzaTagger, TagCache, tag_texts

    tagger = StanzaTagger(model_dir)
    return tag_texts(tagger, texts, "en", cache=TagCache() if cache else None)


RULE_NAMES = tuple(f.name for f in fields(ClassRules))


def add_arguments(parser) -> None:
    """The ``eval-classes`` options on ``parser`` (a subparser of ``python -m heuristics``)."""
    parser.description = (
        "Verb-class, exact noun-class-set and both accuracies (percent) of noun/verb extraction "
        "on an EPIC retrieval-sentence CSV (narration_id,narration,verb_class,noun_classes,verb,"
        "nouns; only narration is input). --method tagger: Stanza + the class-map rules; "
        "--method lookup: the class instances as phrases (the baseline)."
    )
    parser.add_argument("--sentences", type=Path, required=True, help="EPIC retrieval-sentence CSV")
    parser.add_argument("--verb-classes", type=Path, required=True, help="EPIC verb class CSV")
    parser.add_argument("--noun-classes", type=Path, required=True, help="EPIC noun class CSV")
    parser.add_argument(
        "--model-dir", type=folder,
        help="Stanza models (unless --method lookup): this folder, else "
        "$STANZA_RESOURCES_DIR, else ~/.cache/rudder/stanza",
    )
    parser.add_argument("--method", choices=("tagger", "lookup"), default="tagger")
    parser.add_argument(
        "--without",
        action="append",
        default=[],
        choices=RULE_NAMES + ("all",),
        help="turn a class-map rule off (repeatable; 'all' = the bare tagger)",
    )
    parser.add_argument("--lookup-nouns-first", action="store_true", help="the old lookup")
    parser.add_argument("--no-cache", action="store_true")
    parser.add_argument("--json", action="store_true", help="print one JSON object")


def check_gold_classes(rows, class_map, sentences, noun_csv, verb_csv) -> None:
    """Refuse gold classes the class files lack (a truncated or other-version class CSV
    would otherwise score those rows as misses)."""
    known = {pos: {c for (p, _, _), c in class_map.entries.items() if p == pos}
             for pos in ("noun", "verb")}
    for row in rows:
        for pos, ids, csv_path in (("verb", {row["verb_class"]}, verb_csv),
                                   ("noun", row["noun_classes"], noun_csv)):
            missing = sorted(ids - known[pos], key=lambda c: (len(c), c))
            if missing:
                raise ClassFileError(
                    f"{sentences}:{row['line']}: gold {pos} class {missing[0]} is not in "
                    f"{csv_path} ({len(known[pos])} classes there): the class file is incomplete "
                    "or of another version; use the complete class file of these sentences"
                )


def run(args) -> int:
    rows = read_sentences(args.sentences)
    class_map = load_classes(args.noun_classes, args.verb_classes)
    check_gold_classes(rows, class_map, args.sentences, args.noun_classes, args.verb_classes)
    texts = [r["narration"] for r in rows]
    gold = [(r["verb_class"], r["noun_classes"]) for r in rows]
    if args.method == "lookup":
        predicted = predict_lookup(texts, class_map, not args.lookup_nouns_first)
    else:
        rules = ClassRules.none() if "all" in args.without else ClassRules()
        rules = replace(rules, **{name: False for name in args.without if name != "all"})
        predicted = predict_tagged(tag(texts, args.model_dir, not args.no_cache), class_map, rules)
    result = scores(predicted, gold)
    percent = {key: round(100 * value, 2) if key != "rows" else value
               for key, value in result.items()}
    if args.json:
        print(json.dumps(percent))
    else:
        print(f"{args.method}: {result['rows']} rows")
        for key in ("verb_class_accuracy", "noun_set_accuracy", "both_accuracy", "noun_jaccard"):
            print(f"{key.replace('_', ' ')}: {percent[key]:.1f}%")
    return 0
