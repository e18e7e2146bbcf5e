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
per pair of annotators over the pairs both labelled in the same dataset.
"""

from __future__ import annotations

import csv
import io
import itertools
import json
from pathlib import Path

from rudder.atomic import atomic_write_text
from rudder.errors import RudderError

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


def export(store: AnnotationStore, out_dir, dataset: str | None = None) -> tuple[Path, Path]:
    """Write ``relations.jsonl`` and ``relations.csv`` of ``dataset`` (or all) into ``out_dir``."""
    return write_records(relation_records(store, dataset), out_dir)


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
