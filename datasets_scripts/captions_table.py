"""The captions file of ``build videos``: CSV or JSONL rows ``video_id, start, end, lang,
text[, split]``.

``video_id`` is a video file's name in ``--src``, without its extension or with it
(``cat`` or ``cat.mp4``); ``start``/``end`` are seconds (``12.5``) or clock times
(``m:ss``, ``h:mm:ss``, with a fraction: ``1:02.5``, ``1:00:02.5``); both empty or
missing: the whole video. ``split`` is ``train``, ``validation`` or ``test`` (empty: the
build's deterministic split). A CSV has a header row naming the columns (any order, extra
columns ignored), separated by commas, semicolons or tabs (the separator that gives the
header every required column; with semicolons a time may use a decimal comma, ``12,5``);
a ``.jsonl`` file has one JSON object per line.

Records end only at ``\\n``, ``\\r\\n`` or ``\\r`` (CSV and JSON Lines semantics: other
Unicode line breaks such as U+2028 or NEL are text), and a quoted CSV field may span lines.
A file with a NUL byte is refused, naming its line. A bad row is reported with the file,
its line and the field, and skipped (``--strict`` stops at the first); so is a caption
longer than :data:`MAX_CAPTION_CHARS` characters. All of this is checked before any video
is decoded.
"""

from __future__ import annotations

import csv
import io
import json
import math
import re
from dataclasses import dataclass
from pathlib import Path

from rudder.data.layout import SPLITS
from rudder.languages import SUPPORTED

from .build import MAX_CAPTION_CHARS
from .build_report import BuildError, NothingToBuild, Reporter, not_utf8

REQUIRED = ("video_id", "start", "end", "lang", "text")
SEPARATORS = {",": "comma", ";": "semicolon", "\t": "tab"}
RECORD_END = re.compile(r"\r\n|\r|\n")
TIME_HELP = "seconds (12.5) or m:ss / h:mm:ss (1:02.5), or both empty for the whole video"


@dataclass(frozen=True)
class CaptionRow:
    line: int
    video_id: str
    start: float | None  # None: the whole video
    end: float | None
    lang: str
    text: str
    split: str | None


def _read_text(path: Path) -> str:
    """The file as text; a BuildError for an unreadable, non-UTF-8 or NUL-holding file."""
    try:
        text = path.read_bytes().decode("utf-8-sig")
    except UnicodeDecodeError as error:
        raise not_utf8(path, error) from error
    except OSError as error:
        raise BuildError(f"--captions {path}: cannot read it ({error.strerror})") from None
    nul = text.find("\x00")
    if nul >= 0:
        line = 1 + len(RECORD_END.findall(text, 0, nul))
        raise BuildError(
            f"{path}, line {line}: a NUL byte (\\x00): a captions file is UTF-8 text (a file "
            "saved as UTF-16 has one in every other byte); re-save it as UTF-8"
        )
    return text


def _separator(path: Path, text: str) -> str:
    """The separator whose header row names every required column (commas first)."""
    first = next((line for line in RECORD_END.split(text) if line.strip()), "")
    for separator in SEPARATORS:
        header = next(csv.reader([first], delimiter=separator), [])
        if all(c in (h.strip() for h in header) for c in REQUIRED):
            return separator
    header = next(csv.reader([first]), [])
    missing = [c for c in REQUIRED if c not in (h.strip() for h in header)]
    tried = ", ".join(f"{name}s" for name in SEPARATORS.values())
    raise BuildError(
        f"{path}, line 1: the header lacks column(s) {missing}; it needs "
        f"{','.join(REQUIRED)}[,split] (separated by {tried})"
    )


def _csv_records(path: Path, text: str, separator: str):
    """``(first line of the record, dict, problem)`` of each CSV record after the header."""
    reader = csv.reader(io.StringIO(text, newline=""), delimiter=separator)
    header: list[str] | None = None
    start = 1
    try:
        for fields in reader:
            line, start = start, reader.line_num + 1
            if not fields or (len(fields) == 1 and not fields[0].strip()):
                continue
            if header is None:
                header = [h.strip() for h in fields]
                twice = sorted({h for h in header if h and header.count(h) > 1})
                if twice:
                    raise BuildError(f"{path}, line {line}: column(s) {twice} appear twice in "
                                     "the header; name each column once")
                continue
            problem = None
            if any(extra.strip() for extra in fields[len(header):]):  # empty ones are harmless
                problem = (f"{len(fields)} fields, the header has {len(header)}",
                           f"quote a text that holds a {SEPARATORS[separator]}: \"a, b\"")
            record = dict(zip(header, fields, strict=False))
            yield line, record, problem
    except csv.Error as error:
        reason = str(error)
        if "field limit" in reason:
            reason = (f"a field over {csv.field_size_limit():,d} characters; captions are "
                      f"limited to {MAX_CAPTION_CHARS:,d}: close the quote that joins the "
                      "lines after it into one field")
        raise BuildError(f"{path}, line {reader.line_num}: not a readable CSV file ({reason})"
                         ) from None


def _jsonl_records(text: str):
    """``(line, dict or the parse error, None)`` of each non-blank line."""
    for number, line in enumerate(RECORD_END.split(text), start=1):
        if line.strip():
            try:
                record = json.loads(line)
            except json.JSONDecodeError as error:
                record = error
            yield number, record, None


def _records(path: Path):
    text = _read_text(path)
    if path.suffix.lower() in (".jsonl", ".ndjson"):
        return _jsonl_records(text), False
    separator = _separator(path, text)
    return _csv_records(path, text, separator), separator == ";"


CLOCK = re.compile(r"(?:(\d+):)?(\d+):(\d+(?:\.\d*)?|\.\d+)")


def parse_time(value, decimal_comma: bool = False):
    """Seconds from a cell: None for empty; a number, a numeric string (``12.5``; ``12,5``
    with ``decimal_comma``) or a clock time ``[h:]m:ss[.fff]`` (minutes and seconds under
    60 after a larger unit); ValueError or TypeError otherwise, or when not finite."""
    if value is None or (isinstance(value, str) and not value.strip()):
        return None
    if isinstance(value, bool):
        raise TypeError(value)
    if isinstance(value, str):
        text = value.strip()
        if decimal_comma and text.count(",") == 1 and "." not in text:
            text = text.replace(",", ".")
        clock = CLOCK.fullmatch(text)
        if clock:
            hours, minutes, seconds = clock.groups()
            if float(seconds) >= 60 or (hours is not None and int(minutes) >= 60):
                raise ValueError(value)
            return int(hours or 0) * 3600 + int(minutes) * 60 + float(seconds)
        if ":" in text:
            raise ValueError(value)
        value = text
    number = float(value)
    if not math.isfinite(number):
        raise ValueError(value)
    return number


def read_captions(path, reporter: Reporter) -> list[CaptionRow]:
    """The valid rows of a captions file, in file order."""
    path = Path(path)
    rows = []
    records, decimal_comma = _records(path)
    for number, record, problem in records:
        where = f"line {number}"
        if not isinstance(record, dict):
            reporter.problem("not a JSON object", path, where, str(record),
                             "write one {\"video_id\": ..., ...} object per line")
            continue
        if problem is not None:
            reporter.problem("more fields than the header", path, where, problem[0], problem[1])
            continue
        row = _row(path, number, record, reporter, decimal_comma)
        if row is not None:
            rows.append(row)
    if not rows:
        raise NothingToBuild(f"--captions {path}: no valid caption row (see the problems "
                             "above)")
    return rows


def _row(path, number, record, reporter, decimal_comma=False):
    where = f"line {number}"
    missing = [k for k in ("video_id", "lang", "text") if not str(record.get(k) or "").strip()]
    if missing:
        reporter.problem(f"empty field {missing[0]}", path, f"{where}, field {missing[0]}",
                         record.get(missing[0]))
        return None
    text = str(record["text"]).strip()
    if len(text) > MAX_CAPTION_CHARS:
        reporter.problem(f"caption over {MAX_CAPTION_CHARS:,d} characters", path,
                         f"{where}, field text", text,
                         f"it has {len(text):,d}: shorten it, or close the quote that "
                         "joins the lines after it into one field")
        return None
    times = {}
    for key in ("start", "end"):
        try:
            times[key] = parse_time(record.get(key), decimal_comma)
        except (TypeError, ValueError):
            reporter.problem("time is not a finite number", path, f"{where}, field {key}",
                             record.get(key), TIME_HELP)
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
    return CaptionRow(number, str(record["video_id"]).strip(), start, end, lang, text, split)
