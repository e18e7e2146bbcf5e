"""RUDDER (A et al., 2021) -> the rudder dataset layout, from either of two release layouts.

**Folder layout** (defined here; the RUDDER release itself is not public):

```
RAW/videos.tsv              video_id, split (train|validation|test)[, duration]
RAW/captions_<lang>.tsv     video_id, text, start, end, kind[, caption_id][, machine_translated]
                            [, nouns, verbs, noun_classes, verb_classes]
RAW/relations.csv           caption_id_a, caption_id_b, label[, annotator]   (optional)
RAW/features/               expert features (see features.py), unless --features is given
```

Tab-separated with a header row, UTF-8, no quoting. ``<lang>`` is one of mr/hi/ta/te/en;
``kind`` one of rudder.data.layout.CAPTION_KINDS; ``machine_translated`` true/false (empty:
false); the manual marks are ``|``-separated lemmas or concept ids (an empty cell is an empty
list, an absent column leaves the marks to ``heuristics``). Without ``caption_id`` a caption
is ``<video_id>/<lang>/<k>`` (k-th caption of the video in that file, from 0), which is what
``relations.csv`` refers to. ``label`` is 0-3 or negative/partial/positive/description.

**Public-loader layout**: ``rudder_train.pkl`` and ``rudder_test.pkl``, each a list of
``{"id", "2d": array, "captions": {lang: text or [texts]}, "audios": {lang: array}}``.
``2d`` becomes the ``--visual-expert`` (default ``rgb``), ``audios[lang]`` becomes
``audio@<lang>``. Train videos are split into train and a deterministic
``--validation-fraction`` hold-out; captions have no times (start 0, end empty). Captions of
the ``--machine-translated`` languages (default here: ta te, which the RUDDER authors made
with Google Translate) are marked; in the folder layout the column decides unless the flag
is given. The pickles are loaded whole, one at a time: once for the captions and once per
expert, so at most one pickle is in memory.
"""

from __future__ import annotations

import csv
import math
from pathlib import Path
from typing import Any

import pyarrow as pa

from rudder.cli import float_in
from rudder.data.layout import (
    CAPTION_KINDS,
    NOUN_VERB_COLUMNS,
    RELATIONS_SCHEMA,
    SPLITS,
    parse_expert,
)
from rudder.labels import PAIR_LABELS
from rudder.languages import SUPPORTED

from .build import CaptionRows, RawDataset, holdout_validation
from .build_report import BuildError, Reporter, not_utf8
from .features import FeatureSource, load_pickle

TRUE, FALSE = {"true", "1", "yes"}, {"false", "0", "no", ""}
PICKLES = {"train": "rudder_train.pkl", "test": "rudder_test.pkl"}
_PAIR_LABEL_DIGITS = {str(code) for code in PAIR_LABELS.values()}  # "0".."3" in relations files


def add_arguments(parser) -> None:
    parser.add_argument(
        "--validation-fraction",
        type=float_in(0.0, 0.99),
        default=0.1,
        help="pickle layout: share of training videos held out (default 0.1)",
    )
    parser.add_argument(
        "--visual-expert",
        default="rgb",
        help="pickle layout: expert name of the '2d' features (default rgb)",
    )
    parser.add_argument(
        "--machine-translated",
        nargs="*",
        default=None,
        choices=SUPPORTED,
        metavar="LANG",
        help="mark every caption of these languages as machine-translated",
    )


def _rows(path: Path, required, reporter: Reporter):
    """``(line_number, row)`` of a headed TSV/CSV (UTF-8, a byte-order mark allowed); a
    missing column or a file that is not UTF-8 stops the build."""
    delimiter = "\t" if path.suffix == ".tsv" else ","
    if not path.is_file():
        raise BuildError(f"{path}: no such file")
    with open(path, newline="", encoding="utf-8-sig") as handle:
        try:
            reader = csv.DictReader(handle, delimiter=delimiter, quoting=csv.QUOTE_NONE)
            missing = [c for c in required if c not in (reader.fieldnames or [])]
            if missing:
                raise BuildError(f"{path}: header {reader.fieldnames} lacks column(s) {missing}")
            for row in reader:
                if None in row or any(row.get(c) is None for c in required):
                    reporter.problem(
                        "malformed line",
                        path,
                        f"line {reader.line_num}",
                        row,
                        "wrong number of fields for the header",
                    )
                    continue
                yield reader.line_num, row
        except UnicodeDecodeError as error:
            raise not_utf8(path, error) from error


def _float(text, name, path, line, reporter, optional=False):
    if optional and not text.strip():
        return None
    try:
        value = float(text)
        if not math.isfinite(value):
            raise ValueError(text)
        return value
    except ValueError:
        reporter.problem(
            "missing field" if not text.strip() else "not a finite number",
            path,
            f"line {line}",
            text,
            f"column {name}",
        )
        raise


def _read_videos(src: Path, reporter: Reporter) -> dict:
    path = src / "videos.tsv"
    videos = {}
    for line, row in _rows(path, ("video_id", "split"), reporter):
        video_id = row["video_id"].strip()
        if row["split"] not in SPLITS:
            reporter.problem(
                "unknown split", path, f"line {line}", row["split"], f"use one of {list(SPLITS)}"
            )
        elif not video_id or video_id in videos:
            reporter.problem(
                "duplicate video id" if video_id else "missing field",
                path,
                f"line {line}",
                video_id,
            )
        else:
            try:
                duration = _float(
                    row.get("duration") or "", "duration", path, line, reporter, optional=True
                )
            except ValueError:
                continue
            videos[video_id] = {"split": row["split"], "duration": duration}
    return videos


def _read_captions(
    path: Path, lang: str, videos, captions: CaptionRows, forced_mt, reporter, entries: dict
):
    """Add the valid captions of one file; ``entries`` gets each caption's line ordinal k
    within its video (a skipped line keeps its k, so later lines keep their ids)."""
    counts: dict[str, Any] = {}
    for line, row in _rows(path, ("video_id", "text", "start", "end", "kind"), reporter):
        where, video_id, text = f"line {line}", row["video_id"].strip(), row["text"].strip()
        k = counts[video_id] = counts.get(video_id, -1) + 1
        if video_id not in videos:
            reporter.problem("unknown video id", path, where, video_id, "not in videos.tsv")
            continue
        if not text:
            reporter.problem("missing field", path, where, row, "column text")
            continue
        try:
            start = _float(row["start"], "start", path, line, reporter)
            end = _float(row["end"], "end", path, line, reporter)
        except ValueError:
            continue
        duration = videos[video_id]["duration"]
        if start < 0 or start > end or (duration is not None and end > duration):
            reporter.problem(
                "time outside the video",
                path,
                where,
                f"{start} {end}",
                "need 0 <= start <= end"
                + (f" <= duration {duration}" if duration is not None else ""),
            )
            continue
        if row["kind"] not in CAPTION_KINDS:
            reporter.problem(
                "unknown caption kind",
                path,
                where,
                row["kind"],
                f"use one of {list(CAPTION_KINDS)}",
            )
            continue
        flag = (row.get("machine_translated") or "").strip().lower()
        if flag not in TRUE | FALSE:
            reporter.problem(
                "not a boolean", path, where, flag, "column machine_translated: true or false"
            )
            continue
        caption_id = (row.get("caption_id") or "").strip() or f"{video_id}/{lang}/{k}"
        if caption_id in captions.ids:
            reporter.problem("duplicate caption id", path, where, caption_id)
            continue
        noun_verb = {
            c: [v.strip() for v in (row[c] or "").split("|") if v.strip()]
            for c in NOUN_VERB_COLUMNS
            if c in row
        }
        captions.add(
            caption_id,
            video_id,
            lang,
            text,
            start,
            end,
            row["kind"],
            flag in TRUE or lang in forced_mt,
            noun_verb,
        )
        entries[caption_id] = k


def _read_relations(path: Path, caption_ids, reporter) -> pa.Table:
    rows: dict[str, list[Any]] = {name: [] for name in RELATIONS_SCHEMA.names}
    seen: set[Any] = set()
    for line, row in _rows(path, ("caption_id_a", "caption_id_b", "label"), reporter):
        a, b, label = row["caption_id_a"].strip(), row["caption_id_b"].strip(), row["label"].strip()
        value = PAIR_LABELS.get(label, int(label) if label in _PAIR_LABEL_DIGITS else None)
        unknown = [c for c in (a, b) if c not in caption_ids]
        if unknown:
            reporter.problem("unknown caption id", path, f"line {line}", unknown[0])
        elif value is None:
            reporter.problem(
                "unknown label", path, f"line {line}", label, f"use 0-3 or {list(PAIR_LABELS)}"
            )
        elif (a, b) in seen:
            reporter.problem("duplicate pair", path, f"line {line}", (a, b))
        else:
            seen.add((a, b))
            for name, item in zip(
                RELATIONS_SCHEMA.names,
                (a, b, value, (row.get("annotator") or "").strip()),
                strict=True,
            ):
                rows[name].append(item)
    return pa.table(rows, schema=RELATIONS_SCHEMA)


def read_folder(src: Path, args, reporter: Reporter) -> RawDataset:
    videos = _read_videos(src, reporter)
    captions, forced = CaptionRows(), set(args.machine_translated or ())
    entries: dict[str, Any] = {}
    files = sorted(src.glob("captions_*.tsv"))
    if not files:
        raise BuildError(f"{src}: no captions_<lang>.tsv files")
    for path in files:
        lang = path.stem[len("captions_") :]
        if lang not in SUPPORTED:
            reporter.problem(
                "unsupported language",
                path,
                "file name",
                lang,
                f"supported codes: {', '.join(SUPPORTED)}; the file is skipped",
            )
            continue
        _read_captions(path, lang, videos, captions, forced, reporter, entries)
    relations_path = src / "relations.csv"
    relations = (
        _read_relations(relations_path, captions.ids, reporter)
        if relations_path.is_file()
        else None
    )
    method = [
        "RUDDER folder layout (videos.tsv, captions_<lang>.tsv"
        + (", relations.csv)" if relations is not None else ")")
    ]
    return RawDataset(
        "rudder",
        videos,
        captions,
        relations=relations,
        method=method,
        extra={"layout": "folder"},
        feature_entries=entries,
    )


def read_pickles(src: Path, args, reporter: Reporter) -> RawDataset:
    visual = args.visual_expert
    parse_expert(visual)
    forced = set(("ta", "te") if args.machine_translated is None else args.machine_translated)
    videos, captions, audio_langs, paths = {}, CaptionRows(), set(), []
    for part, name in PICKLES.items():
        path = src / name
        if not path.is_file():
            reporter.note(f"{name} not found: the dataset has no {part} videos from it")
            continue
        paths.append(path)
        records = load_pickle(path)
        if not isinstance(records, list):
            raise BuildError(f"{path}: expected a list of dicts with id, 2d, captions, audios")
        ids = []
        for index, record in enumerate(records):
            where = f"record {index}"
            if (
                not isinstance(record, dict)
                or "id" not in record
                or not isinstance(record.get("captions"), dict)
            ):
                reporter.problem(
                    "missing field", path, where, type(record).__name__, "needs id and captions"
                )
                continue
            video_id = str(record["id"])
            if video_id in videos or video_id in ids:
                reporter.problem("duplicate video id", path, where, video_id)
                continue
            ids.append(video_id)
            for lang, texts in record["captions"].items():
                if lang not in SUPPORTED:
                    reporter.problem(
                        "unsupported language",
                        path,
                        f"{where} captions",
                        lang,
                        f"supported codes: {', '.join(SUPPORTED)}",
                    )
                    continue
                listed = isinstance(texts, (list, tuple))
                texts = list(texts) if listed else [texts]
                kept = [t.strip() for t in texts if isinstance(t, str) and t.strip()]
                for index, text in enumerate(texts):
                    if not (isinstance(text, str) and text.strip()):
                        place = f"{where} captions[{lang!r}]" + (f"[{index}]" if listed else "")
                        reporter.problem("empty caption", path, place, text)
                for k, text in enumerate(kept):
                    captions.add(
                        f"{video_id}/{lang}/{k}",
                        video_id,
                        lang,
                        text,
                        0.0,
                        None,
                        machine_translated=lang in forced,
                    )
            audios = record.get("audios")
            audio_langs |= set(audios) if isinstance(audios, dict) else set()
        held = holdout_validation(ids, args.validation_fraction) if part == "train" else set()
        videos.update(
            {v: {"split": "validation" if v in held else part, "duration": None} for v in ids}
        )
        del records
    if not paths:
        raise BuildError(f"{src}: no rudder_train.pkl or rudder_test.pkl")
    sources = [FeatureSource(visual, "rudder_pickle", paths, ("2d",))]
    for lang in sorted(audio_langs):
        if lang in SUPPORTED:
            sources.append(FeatureSource(f"audio@{lang}", "rudder_pickle", paths, ("audios", lang)))
        else:
            reporter.problem(
                "unsupported language", paths[0], "audios", lang, "its audio is left out"
            )
    method = [
        f"RUDDER public-loader pickles; '2d' -> {visual}, audios[lang] -> audio@lang",
        (
            f"validation: {args.validation_fraction:.0%} of rudder_train.pkl's videos "
            "(smallest SHA-256 of the id)"
        ),
        f"machine-translated languages: {sorted(forced) or 'none'}",
    ]
    return RawDataset(
        "rudder",
        videos,
        captions,
        feature_sources=sources,
        method=method,
        extra={"layout": "pickle", "validation_fraction": args.validation_fraction},
    )


def read(args, reporter: Reporter) -> RawDataset:
    src = Path(args.src)
    if any((src / name).is_file() for name in PICKLES.values()):
        raw = read_pickles(src, args, reporter)
    elif (src / "videos.tsv").is_file():
        raw = read_folder(src, args, reporter)
        if not args.features and (src / "features").is_dir():
            args.features = src / "features"
    else:
        raise BuildError(
            f"{src}: not a RUDDER release: expected videos.tsv + captions_<lang>.tsv "
            "(folder layout) or rudder_train.pkl/rudder_test.pkl (see "
            "datasets_scripts/rudder_release.py)"
        )
    return raw
