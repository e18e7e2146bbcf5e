"""How often extracted classes equal EPIC-KITCHENS-100's gold ones (retrieval train sentences).

``python -m heuristics.experiments.epic_eval --model-dir DIR`` reads
``EPIC_100_retrieval_train_sentence.csv`` (``narration_id,narration,verb_class,
noun_classes,verb,nouns``) and the two class CSVs. Only the narration text is input; the
gold ``verb_class`` and ``noun_classes`` are what is scored (the gold ``verb``/``nouns``
columns are never read). Two methods:

- tagger: rudder's tokeniser, the English Stanza tagger in ``DIR``, noun/verb extraction
  (:mod:`heuristics.nouns_verbs`: phrasal verbs, noun compounds) and the class CSVs
  (:meth:`heuristics.classes.ClassMap.classes`, with its back-off); the predicted verb class
  is that of the first extracted verb.
- lookup: every class instance as a phrase (``tap:water`` -> "water tap",
  ``pick-up`` -> "pick up"), matched longest-first left to right on the narration's tokens,
  no morphology; where a phrase is both a noun and a verb instance, it is the verb while no
  verb has been found yet, else the noun. The verb class is that of the first verb match.

Scores: verb-class accuracy, exact noun-class-set accuracy, both, and the mean Jaccard of
the noun-class sets. ``--limit N`` scores every ``len/N``-th row instead (deterministic).
"""

from __future__ import annotations

import argparse
import ast
import csv
import json
import time
from pathlib import Path

from heuristics.classes import ClassFileError, read_epic_classes
from rudder.atomic import atomic_write_text

EPIC = Path(__file__).resolve().parents[3] / "shared" / "data" / "epic100"


def read_sentences(path) -> list[dict]:
    """Rows with ``narration``, ``verb_class`` (str) and ``noun_classes`` (set of str)."""
    path = Path(path)
    rows = []
    with path.open(encoding="utf-8", newline="") as handle:
        reader = csv.DictReader(handle)
        need = {"narration_id", "narration", "verb_class", "noun_classes"}
        if not need <= set(reader.fieldnames or ()):
            raise ClassFileError(
                f"{path}:1: expected columns {sorted(need)}, got {reader.fieldnames}"
            )
        for row in reader:
            try:
                nouns = ast.literal_eval(row["noun_classes"])
                verb = int(row["verb_class"])
            except (ValueError, SyntaxError):
                raise ClassFileError(
                    f"{path}:{reader.line_num}: bad verb_class or noun_classes"
                ) from None
            rows.append(
                {
                    "id": row["narration_id"],
                    "narration": row["narration"],
                    "verb_class": str(verb),
                    "noun_classes": {str(n) for n in nouns},
                }
            )
    return rows


def _phrases(class_map) -> dict[tuple[str, ...], dict[str, str]]:
    """Token tuple of every instance phrase -> {pos: class id}."""
    from rudder.text import tokenize

    out: dict[tuple[str, ...], dict[str, str]] = {}
    for (pos, lang, lemma), concept in class_map.entries.items():
        if pos == "noun":
            head, *mods = lemma.split(":")
            phrase = " ".join(mods + [head])
        else:
            phrase = lemma.replace("-", " ")
        out.setdefault(tuple(tokenize(phrase, "en")), {}).setdefault(pos, concept)
    return out


def lookup(tokens: list[str], phrases: dict, longest: int) -> tuple[str | None, set[str]]:
    """(verb class, noun classes) by longest-match phrase lookup (module docstring)."""
    verb, nouns, i = None, set(), 0
    while i < len(tokens):
        for width in range(min(longest, len(tokens) - i), 0, -1):
            hit = phrases.get(tuple(tokens[i : i + width]))
            if hit:
                if "verb" in hit and (verb is None or "noun" not in hit):
                    verb = hit["verb"] if verb is None else verb
                else:
                    nouns.add(hit["noun"])
                i += width
                break
        else:
            i += 1
    return verb, nouns


def _scores(pairs) -> dict:
    """pairs: (predicted verb, predicted nouns, gold verb, gold nouns)."""
    n = len(pairs)
    verb = sum(p[0] == p[2] for p in pairs)
    nouns = sum(p[1] == p[3] for p in pairs)
    both = sum(p[0] == p[2] and p[1] == p[3] for p in pairs)
    jaccard = sum(len(p[1] & p[3]) / len(p[1] | p[3]) if p[1] | p[3] else 1.0 for p in pairs)
    return {
        "rows": n,
        "verb_class_accuracy": verb / n,
        "noun_set_accuracy": nouns / n,
        "both_accuracy": both / n,
        "noun_jaccard": jaccard / n,
    }


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m heuristics.experiments.epic_eval",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--epic", type=Path, default=EPIC)
    parser.add_argument(
        "--model-dir",
        type=Path,
        help="folder with an English Stanza model (train-tagger --lang en)",
    )
    parser.add_argument("--limit", type=int, help="score an evenly spaced subset of this many rows")
    parser.add_argument("--report", type=Path)
    args = parser.parse_args(argv)

    from heuristics.nouns_verbs import extract
    from heuristics.taggers import StanzaTagger, TagCache, tag_texts
    from rudder.text import tokenize

    rows = read_sentences(args.epic / "EPIC_100_retrieval_train_sentence.csv")
    if args.limit and args.limit < len(rows):
        step = len(rows) / args.limit
        rows = [rows[int(k * step)] for k in range(args.limit)]
    classes = read_epic_classes(args.epic / "EPIC_100_noun_classes.csv", "noun")
    classes.update(read_epic_classes(args.epic / "EPIC_100_verb_classes.csv", "verb"))
    texts = [r["narration"] for r in rows]
    gold = [(r["verb_class"], r["noun_classes"]) for r in rows]

    phrases = _phrases(classes)
    longest = max(len(p) for p in phrases)
    start = time.perf_counter()
    found = [lookup(tokenize(t, "en"), phrases, longest) for t in texts]
    results = {
        "lookup": {
            **_scores([(v, n, *g) for (v, n), g in zip(found, gold)]),
            "seconds": round(time.perf_counter() - start, 1),
        }
    }

    if args.model_dir:
        tagger = StanzaTagger(args.model_dir)
        start = time.perf_counter()
        tagged = tag_texts(tagger, texts, "en", cache=TagCache())
        predicted = []
        for words in tagged:
            nouns, verbs = extract(words, "en")
            verb_classes = classes.classes("verb", "en", verbs)
            predicted.append(
                (
                    verb_classes[0] if verb_classes else None,
                    set(classes.classes("noun", "en", nouns)),
                )
            )
        results["tagger"] = {
            **_scores([(v, n, *g) for (v, n), g in zip(predicted, gold)]),
            "seconds": round(time.perf_counter() - start, 1),
            "model": tagger.model_id("en"),
        }
    for name, r in results.items():
        print(
            f"| {name} | {r['rows']} | {100 * r['verb_class_accuracy']:.1f} | {100 * r['noun_set_accuracy']:.1f} "
            f"| {100 * r['both_accuracy']:.1f} | {100 * r['noun_jaccard']:.1f} |"
        )
    if args.report:
        atomic_write_text(args.report, json.dumps(results, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
