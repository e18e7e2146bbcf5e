"""The captions file of ``build videos``: CSV or JSONL rows ``video_id, start, end, lang,
text[, split]``.

``video_id`` is a video file's name without its extension; ``start``/``end`` are seconds
(both empty or missing: the whole video); ``split`` is ``train``, ``validation`` or
``test`` (empty: the build's deterministic split). A CSV has a header row naming the
columns (any order, extra columns ignored); a ``.jsonl`` file has one JSON object per line.
A bad row is reported with the file, its line and the field, and skipped (``--strict``
stops at the first).
"""

from __future__ import annotations

import csv
import json
import math
from dataclasses import dataclass
from pathlib import Path

from rudder.data.layout import SPLITS
from rudder.languages import SUPPORTED

from .build_report import BuildError, Reporter, not_utf8

REQUIRED = ("video_id", "start", "end", "lang", "text")


@dataclass(frozen=True)
class CaptionRow:
    line: int
    video_id: str
    start: float | None  # None: the whole video
    end: float | None
    lang: str
    text: str
    split: str | None


def _records(path: Path):
    """``(line number, dict)`` of a CSV or JSONL file, or a BuildError for the file."""
    try:
        text = path.read_text(encoding="utf-8-sig")
    except UnicodeDecodeError as error:
        raise not_utf8(path, error) from error
    except OSError as error:
        raise BuildError(f"--captions {path}: cannot read it ({error.strerror})") from None
    if path.suffix.lower() in (".jsonl", ".ndjson"):
        for number, line in enumerate(text.splitlines(), start=1):
            if line.strip():
                try:
                    record = json.loads(line)
                except json.JSONDecodeError as error:
                    record = error
                yield number, record
        return
    reader = csv.DictReader(text.splitlines())
    missing = [c for c in REQUIRED if c not in (reader.fieldnames or [])]
    if missing:
        raise BuildError(
            f"{path}, line 1: the header lacks column(s) {missing}; it needs "
            f"{','.join(REQUIRED)}[,split]"
        )
    for record in reader:
        yield reader.line_num, record


def _time(value):
    """Seconds from a cell: None for empty, else a finite float (ValueError otherwise)."""
    if value is None or (isinstance(value, str) and not value.strip()):
        return None
    if isinstance(value, bool):
        raise TypeError(value)
    number = float(value)
    if not math.isfinite(number):
        raise ValueError(value)
    return number


def read_captions(path, reporter: Reporter) -> list[CaptionRow]:
    """The valid rows of a captions file, in file order."""
    path = Path(path)
    rows = []
    for number, record in _records(path):
        where = f"line {number}"
        if not isinstance(record, dict):
            reporter.problem("not a JSON object", path, where, str(record),
                             "write one {\"video_id\": ..., ...} object per line")
            continue
        row = _row(path, number, record, reporter)
        if row is not None:
            rows.append(row)
    if not rows:
        raise BuildError(f"--captions {path}: no valid caption row (see the problems above)")
    return rows


def _row(path, number, record, reporter):
    where = f"line {number}"
    missing = [k for k in ("video_id", "lang", "text") if not str(record.get(k) or "").strip()]
    if missing:
        reporter.problem(f"empty field {missing[0]}", path, f"{where}, field {missing[0]}",
                         record.get(missing[0]))
        return None
    times = {}
    for key in ("start", "end"):
        try:
            times[key] = _time(record.get(key))
        except (TypeError, ValueError):
            reporter.problem("time is not a finite number", path, f"{where}, field {key}",
                             record.get(key), "seconds, e.g. 12.5, or empty for the whole video")
            return None
    start, end = times["start"], times["end"]
    if (start is None) != (end is None):
        field = "end" if end is None else "start"
        reporter.problem("only one of start/end", path, f"{where}, field {field}",
                         record.get(field), "give both, or leave both empty for the whole video")
        return None
    if start is not None and not 0 <= start < end:
        reporter.problem("segment is empty or negative", path, f"{where}, field end",
                         f"{start} {end}", "need 0 <= start < end")
        return None
    lang = str(record["lang"]).strip()
    if lang not in SUPPORTED:
        reporter.problem("unsupported language", path, f"{where}, field lang", lang,
                         f"use one of {list(SUPPORTED)}")
        return None
    split = str(record.get("split") or "").strip() or None
    if split is not None and split not in SPLITS:
        reporter.problem("unknown split", path, f"{where}, field split", split,
                         f"use one of {list(SPLITS)} or leave it empty")
        return None
    return CaptionRow(number, str(record["video_id"]).strip(), start, end, lang,
                      str(record["text"]).strip(), split)
