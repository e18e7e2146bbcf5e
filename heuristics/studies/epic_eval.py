"""EPIC-KITCHENS-100 extraction experiment: baseline, rules, ablation and held-out halves.

``python -m heuristics.studies.epic_eval --model-dir DIR [--report F.json]`` scores, on
``EPIC_100_retrieval_train_sentence.csv`` with the two class CSVs (see
:mod:`heuristics.eval_classes` for the methods and scores):

- the lookup baseline, with and without the verbs-first fix;
- the tagger with every class-map rule, with none (the bare tagger), and with each rule
  turned off in turn (ablation);
- the same for two halves: the narrations of participants P01-P15 and of P16-P37 (the
  rules have no fitted parameters, so the halves show whether they hold on other kitchens
  and people), and even/odd rows;
- with ``--perturbations``, the tagger with every rule on the narrations with a word added
  off EPIC's bare imperative style (:data:`PERTURBATIONS`: "now ", "I ", "please " before,
  " again" after).
"""

from __future__ import annotations

import argparse
import json
from dataclasses import replace
from pathlib import Path
from typing import Any

from rudder.atomic import atomic_write_text
from rudder.cli import ArgumentParser, folder, output_file

from ..class_rules import ClassRules
from ..eval_classes import (
    RULE_NAMES,
    load_classes,
    predict_lookup,
    predict_tagged,
    read_sentences,
    scores,
    tag,
)
from . import run_study

EPIC = Path(__file__).resolve().parents[3] / "shared" / "data" / "epic100"
PERTURBATIONS = {
    "now + narration": lambda text: f"now {text}",
    "I + narration": lambda text: f"I {text}",
    "please + narration": lambda text: f"please {text}",
    "narration + again": lambda text: f"{text} again",
}


def _participant(narration_id: str) -> int:
    return int(narration_id.split("_", 1)[0].lstrip("P"))


def build_parser() -> ArgumentParser:
    parser = ArgumentParser(
        prog="python -m heuristics.studies.epic_eval",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--epic", type=folder, default=EPIC)
    parser.add_argument("--model-dir", type=folder, required=True, help="English Stanza models")
    parser.add_argument("--report", type=output_file)
    parser.add_argument("--perturbations", action="store_true",
                        help="also score the narrations with a word added (tags them again)")
    return parser


def main(argv=None) -> int:
    return run_study(build_parser(), _run, argv)


def _run(args) -> int:
    rows = read_sentences(args.epic / "EPIC_100_retrieval_train_sentence.csv")
    classes = load_classes(
        args.epic / "EPIC_100_noun_classes.csv", args.epic / "EPIC_100_verb_classes.csv"
    )
    texts = [r["narration"] for r in rows]
    gold = [(r["verb_class"], r["noun_classes"]) for r in rows]
    subsets = {
        "all": list(range(len(rows))),
        "P01-P15": [i for i, r in enumerate(rows) if _participant(r["id"]) <= 15],
        "P16-P37": [i for i, r in enumerate(rows) if _participant(r["id"]) > 15],
        "even rows": list(range(0, len(rows), 2)),
        "odd rows": list(range(1, len(rows), 2)),
    }
    tagged = tag(texts, args.model_dir)
    methods = {
        "lookup (nouns first)": predict_lookup(texts, classes, verbs_first=False),
        "lookup": predict_lookup(texts, classes),
        "tagger, no rules": predict_tagged(tagged, classes, ClassRules.none()),
        "tagger + rules": predict_tagged(tagged, classes, ClassRules()),
    }
    for name in RULE_NAMES:
        methods[f"  without {name}"] = predict_tagged(
            tagged, classes, replace(ClassRules(), **{name: False})
        )
    results: dict[str, Any] = {}
    print("| method | rows | verb class | noun set | both | noun Jaccard |")
    print("|---|---|---|---|---|---|")
    for subset, index in subsets.items():
        for method, predicted in methods.items():
            if subset != "all" and method.startswith("  "):
                continue
            _row(results, f"{subset}: {method.strip()}",
                 scores([predicted[i] for i in index], [gold[i] for i in index]))
    if args.perturbations:
        for name, perturb in PERTURBATIONS.items():
            changed = tag([perturb(text) for text in texts], args.model_dir)
            _row(results, f"all, {name}: tagger + rules",
                 scores(predict_tagged(changed, classes, ClassRules()), gold))
    if args.report:
        atomic_write_text(args.report, json.dumps(results, indent=2) + "\n")
    return 0


def _row(results: dict, label: str, r: dict) -> None:
    results[label] = r
    print(
        f"| {label} | {r['rows']} | {100 * r['verb_class_accuracy']:.1f} "
        f"| {100 * r['noun_set_accuracy']:.1f} | {100 * r['both_accuracy']:.1f} "
        f"| {100 * r['noun_jaccard']:.1f} |"
    )


if __name__ == "__main__":
    raise SystemExit(main())
