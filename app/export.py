"""Export of the annotation store, and agreement between annotators.

Relation file format (read by ``heuristics`` to fill a dataset's ``relations`` config):

* **JSONL** (``relations.jsonl``, UTF-8): one JSON object per line, one line per current
  label of an annotator (undone labels and superseded relabels are left out), oldest first::

    {"caption_id_a": "v001-mr-0", "caption_id_b": "v042-hi-1", "label": "partial",
     "annotator": "asha", "time": "2024-05-01T09:30:12.123456+00:00", "dataset": "rudder-sample"}

  ``caption_id_a`` is the query caption and ``caption_id_b`` the candidate shown beside it;
  ``label`` is the name of docs/architecture.md's pair label (``negative`` 0, ``partial`` 1,
  ``positive`` 2, ``description`` 3); ``time`` is ISO 8601 in UTC; ``dataset`` is the name
  in the dataset's ``rudder.json``.
* **CSV** (``relations.csv``): the same columns in the same order, with a header row
  ``caption_id_a,caption_id_b,label,annotator,time,dataset``. A cell that starts with
  ``=``, ``+``, ``-``, ``@``, a tab or a carriage return gets a leading ``'`` so that a
  spreadsheet shows it as text instead of running it as a formula (OWASP, "CSV Injection");
  ``heuristics import-relations`` removes that quote again. JSONL is written as stored.

Names (annotator, dataset) and caption ids holding a NUL byte are refused before anything
is written: no tool reads them back alike.

Agreement is Cohen's kappa (Cohen 1960; ``sklearn.metrics.cohen_kappa_score``, unweighted)
per pair of annotators over the pairs both labelled in the same dataset, and Krippendorff's
alpha over every annotator at once (:func:`rudder.evaluation.agreement.krippendorff_alpha`): nominal
over the four labels, and ordinal over negative < partial < positive, where a description
label counts as no value (it is no degree of the same scale). :func:`agreement_report`
adds per annotator their shared pairs, how often they agree with the others there and the
ordinal alpha without them, and lists the pairs whose annotators disagree; the export
writes it as ``agreement.json`` beside the relations.
"""

from __future__ import annotations

import csv
import io
import itertools
import json
from pathlib import Path

import numpy as np

from rudder.atomic import atomic_write_text
from rudder.errors import RudderError
from rudder.evaluation.agreement import krippendorff_alpha, reliability_data, round_or_none
from rudder.labels import PAIR_LABELS, PairLabel

from .annotations_db import LABEL_NAMES, AnnotationStore

COLUMNS = ("caption_id_a", "caption_id_b", "label", "annotator", "time", "dataset")
FORMULA_STARTS = ("=", "+", "-", "@", "\t", "\r")


class ExportError(RudderError):
    """Records that cannot be exported as they are; the message names the record."""


def spreadsheet_safe(value):
    """``value`` with a leading ``'`` when a spreadsheet would read it as a formula."""
    return "'" + value if isinstance(value, str) and value.startswith(FORMULA_STARTS) else value


def check_records(records: list[dict]) -> None:
    """Refuse a record whose text fields hold a NUL byte, naming the field and record."""
    for number, record in enumerate(records, start=1):
        for column in COLUMNS:
            if "\0" in str(record.get(column, "")):
                raise ExportError(
                    f"record {number} ({record.get('caption_id_a')!r} -> "
                    f"{record.get('caption_id_b')!r}): {column} {record[column]!r} holds a NUL "
                    "byte; rename it in the annotation store, then export again"
                )


def relation_records(store: AnnotationStore, dataset: str | None = None) -> list[dict]:
    """The current labels as export records (label as its name), oldest first."""
    return [
        {
            "caption_id_a": row["caption_id_a"],
            "caption_id_b": row["caption_id_b"],
            "label": LABEL_NAMES[row["label"]],
            "annotator": row["annotator"],
            "time": row["time"],
            "dataset": row["dataset"],
        }
        for row in store.current(dataset)
    ]


def write_jsonl(records: list[dict], path) -> Path:
    """Write records as JSONL (atomically)."""
    text = "".join(
        json.dumps({c: r[c] for c in COLUMNS}, ensure_ascii=False) + "\n" for r in records
    )
    return atomic_write_text(Path(path), text, newline="")


def write_csv(records: list[dict], path) -> Path:
    """Write records as CSV with a header (atomically)."""
    buffer = io.StringIO()
    writer = csv.DictWriter(buffer, fieldnames=COLUMNS, extrasaction="ignore", lineterminator="\n")
    writer.writeheader()
    writer.writerows({c: spreadsheet_safe(r[c]) for c in COLUMNS} for r in records)
    return atomic_write_text(Path(path), buffer.getvalue(), newline="")


def export(store: AnnotationStore, out_dir, dataset: str | None = None) -> tuple[Path, ...]:
    """Write ``relations.jsonl``, ``relations.csv`` and ``agreement.json`` of ``dataset`` (or
    all) into ``out_dir``."""
    records = relation_records(store, dataset)
    return (*write_records(records, out_dir), write_agreement(records, out_dir))


def write_agreement(records: list[dict], out_dir) -> Path:
    """Write :func:`agreement_report` of ``records`` as ``agreement.json`` (atomically)."""
    report = agreement_report(records)
    return atomic_write_text(Path(out_dir) / "agreement.json",
                             json.dumps(report, indent=2, ensure_ascii=False) + "\n")


def write_records(records: list[dict], out_dir) -> tuple[Path, Path]:
    """Write ``relations.jsonl`` and ``relations.csv`` of ``records`` into ``out_dir``
    (records with a NUL byte are refused first: :func:`check_records`)."""
    check_records(records)
    out_dir = Path(out_dir)
    if out_dir.exists() and not out_dir.is_dir():
        raise ExportError(f"--export {out_dir} is a file; name a folder (relations.jsonl and "
                          "relations.csv are written into it)")
    return write_jsonl(records, out_dir / "relations.jsonl"), write_csv(
        records, out_dir / "relations.csv"
    )


def agreement(records: list[dict]) -> list[dict]:
    """Cohen's kappa for every pair of annotators over the pairs both labelled.

    Returns rows ``{"annotator_a", "annotator_b", "shared_pairs", "kappa"}`` sorted by
    names; ``kappa`` is ``None`` when fewer than two shared pairs exist or when both
    annotators used one and the same label throughout (kappa is undefined: 0/0).
    """
    from sklearn.metrics import cohen_kappa_score

    by_annotator: dict[str, dict] = {}
    for r in records:
        key = (r["dataset"], r["caption_id_a"], r["caption_id_b"])
        by_annotator.setdefault(r["annotator"], {})[key] = r["label"]
    rows = []
    for a, b in itertools.combinations(sorted(by_annotator), 2):
        shared = sorted(by_annotator[a].keys() & by_annotator[b].keys())
        first = [by_annotator[a][k] for k in shared]
        second = [by_annotator[b][k] for k in shared]
        kappa = None
        if len(shared) >= 2 and len(set(first) | set(second)) > 1:
            kappa = float(cohen_kappa_score(first, second))
        rows.append(
            {"annotator_a": a, "annotator_b": b, "shared_pairs": len(shared), "kappa": kappa}
        )
    return rows


# The ordinal scale of the labels for Krippendorff's alpha (description: no value on it).
ORDINAL = {PairLabel.NEGATIVE.text: 0, PairLabel.PARTIAL.text: 1, PairLabel.POSITIVE.text: 2}


def agreement_report(records: list[dict]) -> dict:
    """Agreement of the annotators of ``records`` (export records, label names): counts,
    Krippendorff's alpha (nominal and ordinal), Cohen's kappa per pair of annotators, per
    annotator their labels, shared pairs, observed agreement with the others there and the
    ordinal alpha without them, and every pair whose annotators disagree."""
    def nominal(r):
        return PAIR_LABELS[r["label"]]

    def ordinal(r):
        return ORDINAL.get(r["label"])

    coders, units, data = reliability_data(records, nominal)
    _, _, scale = reliability_data(records, ordinal)
    labelled = ~np.isnan(data)
    shared = labelled.sum(0) >= 2 if data.size else np.zeros(0, dtype=bool)
    per_annotator = []
    for row, name in enumerate(coders):
        mine = labelled[row] & shared
        others = np.delete(data, row, axis=0)[:, mine]
        same = (others == data[row, mine]).sum()
        compared = (~np.isnan(others)).sum()
        per_annotator.append({
            "annotator": name,
            "labels": int(labelled[row].sum()),
            "shared_pairs": int(mine.sum()),
            "agreement": round_or_none(same / compared if compared else None),
            "alpha_without": round_or_none(
                krippendorff_alpha(np.delete(scale, row, axis=0), "ordinal")
                if len(coders) > 2 else None),
        })
    disagreements = []
    names = {int(label): label.text for label in PairLabel}
    for column in np.flatnonzero(shared):
        values = data[:, column]
        given = ~np.isnan(values)
        if len(set(values[given])) > 1:
            dataset, query, candidate = units[column]
            disagreements.append({
                "dataset": dataset, "caption_id_a": query, "caption_id_b": candidate,
                "labels": {coders[i]: names[int(values[i])] for i in np.flatnonzero(given)},
            })
    return {
        "annotators": len(coders),
        "labels": int(labelled.sum()),
        "pairs": len(units),
        "shared_pairs": int(shared.sum()),
        "alpha": {"nominal": round_or_none(krippendorff_alpha(data, "nominal")),
                  "ordinal": round_or_none(krippendorff_alpha(scale, "ordinal"))},
        "kappa": [{**row, "kappa": round_or_none(row["kappa"])} for row in agreement(records)],
        "per_annotator": per_annotator,
        "disagreements": disagreements,
    }
