"""Caption-pair relations for the dataset's ``relations`` config.

Two sources, both merged into ``relations/all.parquet`` (columns ``caption_id_a,
caption_id_b, label, annotator``; labels 0 negative, 1 partial, 2 positive, 3 description):

- RUDDER's video-based heuristic (:func:`video_relations`): each video has a set of
  objects and a set of actions (e.g. Charades' ``objects`` and ``actions`` columns); for
  videos ``a != b`` of the same split, the noun/verb heuristic of
  :func:`rudder.supervision.partial_labels` with objects as nouns, actions as verbs and
  thresholds ``alpha_o``, ``alpha_a`` labels ``a`` as query against ``b``; every caption
  pair of a pair labelled partial or positive becomes a relation (negatives are left
  implicit: a pair without a relation falls back to the caption heuristic).
- manual annotations (:func:`read_manual`): the app's export (JSON lines
  ``{"caption_id_a", "caption_id_b", "label", "annotator", "time"}``) or a CSV with header
  ``caption_id_a,caption_id_b,label[,annotator][,time][,dataset]``; ``label`` is a name
  (negative/partial/positive/description) or its number. For a pair annotated several
  times by one annotator the latest ``time`` wins (file order when times are equal or
  absent); a time is ISO-8601 (the app's export; UTC when it names no offset) or seconds
  since 1970, compared as instants. Records whose ``dataset`` names another dataset than
  the target's ``rudder.json`` name are skipped (and counted), so an export of several
  datasets imports.

Merging replaces the rows of the same ``(caption_id_a, caption_id_b, annotator)``; the
video heuristic (annotator ``video-heuristic``) replaces all its earlier rows. Training
needs one label per ordered pair, so the merged rows are then resolved (:func:`resolve`):
a manual label overrides a different ``video-heuristic`` one, and annotators who disagree
are settled by the rule ``--resolve`` names: ``refuse`` (the default: an error naming the
pair and the annotators), ``majority`` (the label most annotators gave; a tie is refused)
or ``annotator:NAME`` (NAME's label where NAME labelled the pair). The losing rows are
dropped; the exported files keep every annotator's labels.
"""

from __future__ import annotations

import csv
import json
import math
import re
from datetime import datetime, timezone
from pathlib import Path

import numpy as np
import pandas as pd
import pyarrow as pa

from rudder.atomic import dataset_lock
from rudder.data.layout import RELATIONS_SCHEMA, SPLITS, DatasetFolder
from rudder.data.layout_writer import replace_tables
from rudder.labels import PAIR_LABELS, PairLabel

from .text_files import open_text

VIDEO_ANNOTATOR = "video-heuristic"
_CHARADES_ACTION = re.compile(r"(c\d{3})\s+[\d.]+\s+[\d.]+")


class RelationError(ValueError):
    """A malformed annotation file or one that does not fit the dataset."""


def _items(cell: str | None) -> list[str]:
    """``;``-separated items; a Charades action ``c092 11.90 21.20`` becomes ``c092``."""
    out = []
    for item in (cell or "").split(";"):
        item = item.strip()
        match = _CHARADES_ACTION.fullmatch(item)
        if item:
            out.append(match.group(1) if match else item)
    return list(dict.fromkeys(out))


def read_video_sets(path) -> dict[str, tuple[list[str], list[str]]]:
    """``video_id -> (objects, actions)`` from a CSV with ``video_id`` (or Charades' ``id``),
    ``objects`` and ``actions`` columns, items separated by ``;``."""
    path = Path(path)
    if not path.is_file():
        raise RelationError(f"{path}: no such file")
    out: dict[str, tuple[list[str], list[str]]] = {}
    with open_text(path, RelationError, newline="") as handle:
        reader = csv.DictReader(handle)
        fields = reader.fieldnames or []
        key = "video_id" if "video_id" in fields else "id"
        missing = [c for c in (key, "objects", "actions") if c not in fields]
        if missing:
            raise RelationError(
                f"{path}:1: missing column(s) {missing}; expected video_id,objects,actions "
                "(or Charades' id,...,objects,...,actions)"
            )
        for row in reader:
            line = reader.line_num
            video = (row.get(key) or "").strip()
            if not video:
                raise RelationError(f"{path}:{line}: empty {key}")
            if video in out:
                raise RelationError(f"{path}:{line}: video {video!r} listed twice")
            out[video] = (_items(row.get("objects")), _items(row.get("actions")))
    return out


def covered_videos(root, video_sets: dict, path) -> tuple[int, int]:
    """How many of the dataset's captioned videos ``video_sets`` (read from ``path``) lists,
    and how many there are; none is an error naming ``path`` (the ids do not match: another
    dataset, or another spelling), since the heuristic would then replace its earlier rows
    with nothing."""
    folder = DatasetFolder(root)
    videos = {
        video
        for split in SPLITS
        if (folder.root / "captions" / f"{split}.parquet").is_file()
        for video in folder.captions(split, columns=["video_id"]).column("video_id").to_pylist()
    }
    found = len(videos & video_sets.keys())
    if not found:
        raise RelationError(
            f"{path}: none of its {len(video_sets)} video ids is a captioned video of "
            f"{folder.root} (the file has e.g. {min(video_sets, default='-')!r}, the dataset "
            f"{min(videos, default='-')!r}); nothing was written. Check that "
            "the file belongs to this dataset and spells its video ids"
        )
    return found, len(videos)


def _multi_hot(lists, ids: dict) -> np.ndarray:
    out = np.zeros((len(lists), max(len(ids), 1)), np.float32)
    for r, row in enumerate(lists):
        out[r, [ids[x] for x in row]] = 1.0
    return out


def video_relations(
    root, video_sets: dict, alpha_o: float, alpha_a: float, block: int = 512
) -> pa.Table:
    """Relations from the video heuristic (module docstring), split by split."""
    import torch

    from rudder.supervision import partial_labels

    folder = DatasetFolder(root)
    objects = {o: k for k, o in enumerate(sorted({o for s in video_sets.values() for o in s[0]}))}
    actions = {a: k for k, a in enumerate(sorted({a for s in video_sets.values() for a in s[1]}))}
    parts = []
    for split in SPLITS:
        if not (folder.root / "captions" / f"{split}.parquet").is_file():
            continue
        captions = folder.captions(split, columns=["caption_id", "video_id"])
        caption_ids = np.asarray(captions.column("caption_id").to_pylist(), dtype=object)
        caption_videos = np.asarray(captions.column("video_id").to_pylist(), dtype=object)
        videos = sorted(v for v in set(caption_videos) if v in video_sets)
        if len(videos) < 2:
            continue
        o = torch.from_numpy(_multi_hot([video_sets[v][0] for v in videos], objects))
        a = torch.from_numpy(_multi_hot([video_sets[v][1] for v in videos], actions))
        position = {v: k for k, v in enumerate(videos)}
        order = np.argsort([position.get(v, len(videos)) for v in caption_videos], kind="stable")
        sizes = np.bincount(
            [position[v] for v in caption_videos if v in position], minlength=len(videos)
        )
        offsets = np.concatenate([[0], np.cumsum(sizes)])
        for start in range(0, len(videos), block):
            labels = partial_labels(
                o[start : start + block], a[start : start + block], o, a, alpha_o, alpha_a
            )
            self_pairs = torch.arange(labels.shape[0]), torch.arange(start, start + labels.shape[0])
            labels[self_pairs] = PairLabel.NEGATIVE
            rows, cols = (labels >= PairLabel.PARTIAL).nonzero(as_tuple=True)
            lab = labels[rows, cols].numpy()
            qa, qb = rows.numpy() + start, cols.numpy()
            count = sizes[qa] * sizes[qb]
            pair = np.repeat(np.arange(len(qa)), count)
            within = np.arange(count.sum()) - np.repeat(np.cumsum(count) - count, count)
            first = offsets[qa][pair] + within // sizes[qb][pair]
            second = offsets[qb][pair] + within % sizes[qb][pair]
            parts.append(
                pa.table(
                    {
                        "caption_id_a": pa.array(caption_ids[order[first]].tolist(), pa.string()),
                        "caption_id_b": pa.array(caption_ids[order[second]].tolist(), pa.string()),
                        "label": pa.array(lab[pair], pa.int8()),
                        "annotator": pa.array([VIDEO_ANNOTATOR] * len(pair), pa.string()),
                    }
                )
            )
    return pa.concat_tables(parts) if parts else RELATIONS_SCHEMA.empty_table()


def _label(value, where: str) -> int:
    if isinstance(value, str) and value.strip().lower() in PAIR_LABELS:
        return PAIR_LABELS[value.strip().lower()]
    if isinstance(value, str) and value.strip().isdigit():
        value = int(value.strip())
    if isinstance(value, int) and not isinstance(value, bool) and value in PAIR_LABELS.values():
        return value
    names = ", ".join(f"{k} ({v})" for k, v in PAIR_LABELS.items())
    raise RelationError(f"{where}: label {value!r} is not one of {names}")


def _timestamp(value, where: str) -> float:
    """Seconds since 1970 of an annotation's ``time`` (module docstring); absent: -inf."""
    if value is None or value == "":
        return float("-inf")
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        if math.isfinite(value):
            return float(value)
    elif isinstance(value, str):
        try:
            seconds = float(value)
        except ValueError:
            seconds = None
        if seconds is not None:
            if math.isfinite(seconds):
                return seconds
        else:
            text = value.strip()
            text = text[:-1] + "+00:00" if text.endswith(("Z", "z")) else text  # Python 3.10
            try:
                stamp = datetime.fromisoformat(text)
            except ValueError:
                pass
            else:
                return stamp.replace(tzinfo=stamp.tzinfo or timezone.utc).timestamp()
    raise RelationError(
        f"{where}: time {value!r} is neither ISO-8601 (2024-05-01T12:00:00Z) nor seconds "
        "since 1970"
    )


def _rows(path: Path):
    """(line, a, b, label, annotator, time) of a JSONL or CSV annotation file."""
    if path.suffix in (".jsonl", ".json"):
        with open_text(path, RelationError) as handle:
            for line, text in enumerate(handle, start=1):
                if not text.strip():
                    continue
                try:
                    record = json.loads(text)
                except json.JSONDecodeError as error:
                    raise RelationError(f"{path}:{line}: not a JSON object ({error.msg})") from None
                if not isinstance(record, dict):
                    raise RelationError(f"{path}:{line}: expected a JSON object")
                yield line, record
        return
    if path.suffix != ".csv":
        raise RelationError(f"{path}: use a .jsonl (the app's export) or .csv file")
    with open_text(path, RelationError, newline="") as handle:
        reader = csv.DictReader(handle)
        for row in reader:
            yield reader.line_num, {k: _unquoted(v) for k, v in row.items() if v not in (None, "")}


def _unquoted(cell):
    """A CSV cell without the ``'`` the app's export puts before ``=``, ``+``, ``-``, ``@``,
    a tab or a carriage return (against spreadsheet formulas; ``app/export.py``)."""
    if isinstance(cell, str) and len(cell) > 1 and cell[0] == "'" and cell[1] in "=+-@\t\r":
        return cell[1:]
    return cell


def read_manual(
    paths, known_captions: set, default_annotator: str = "manual", dataset: str | None = None
) -> tuple[pa.Table, int]:
    """Manual relations from annotation files (module docstring), validated against the
    dataset, and how many records were skipped because their ``dataset`` field names
    another dataset than ``dataset`` (an export of several datasets; records without the
    field are kept)."""
    latest: dict[tuple[str, str, str], tuple] = {}
    skipped = 0
    for order, path in enumerate(Path(p) for p in paths):
        if not path.is_file():
            raise RelationError(f"{path}: no such annotation file")
        for line, record in _rows(path):
            where = f"{path}:{line}"
            if dataset is not None and record.get("dataset", dataset) != dataset:
                skipped += 1
                continue
            missing = [k for k in ("caption_id_a", "caption_id_b", "label") if k not in record]
            if missing:
                raise RelationError(f"{where}: missing field(s) {missing}")
            a, b = str(record["caption_id_a"]), str(record["caption_id_b"])
            for cid in (a, b):
                if cid not in known_captions:
                    raise RelationError(f"{where}: caption_id {cid!r} is not in the dataset")
            if a == b:
                raise RelationError(f"{where}: a caption cannot be related to itself ({a!r})")
            annotator = str(record.get("annotator") or default_annotator)
            key = (a, b, annotator)
            stamp = (_timestamp(record.get("time"), where), order, line)
            if key not in latest or stamp >= latest[key][0]:
                latest[key] = (stamp, _label(record["label"], where))
    keys = sorted(latest)
    table = pa.table(
        {
            "caption_id_a": pa.array([k[0] for k in keys], pa.string()),
            "caption_id_b": pa.array([k[1] for k in keys], pa.string()),
            "label": pa.array([latest[k][1] for k in keys], pa.int8()),
            "annotator": pa.array([k[2] for k in keys], pa.string()),
        }
    )
    return table, skipped


def merge(old: pa.Table | None, new: pa.Table, replace_annotator: str | None = None) -> pa.Table:
    """``old`` rows not overridden by ``new`` (same pair and annotator), then ``new``."""
    new = new.select(RELATIONS_SCHEMA.names).cast(RELATIONS_SCHEMA)
    if old is None or old.num_rows == 0:
        return new
    old = old.select(RELATIONS_SCHEMA.names).cast(RELATIONS_SCHEMA)
    taken = set(
        zip(*(new.column(c).to_pylist() for c in ("caption_id_a", "caption_id_b", "annotator")),
            strict=True)
    )
    keys = zip(*(old.column(c).to_pylist() for c in ("caption_id_a", "caption_id_b", "annotator")),
               strict=True)
    keep = [k not in taken and k[2] != replace_annotator for k in keys]
    return pa.concat_tables([old.filter(pa.array(keep)), new])


RESOLVE_HELP = "refuse (default), majority or annotator:NAME"
PAIR = ["caption_id_a", "caption_id_b"]


def resolve(table: pa.Table, rule: str = "refuse") -> pa.Table:
    """One label per ordered pair (module docstring): the rows that lose are dropped."""
    if rule not in ("refuse", "majority") and not rule.startswith("annotator:"):
        raise RelationError(f"unknown --resolve rule {rule!r}; use {RESOLVE_HELP}")
    if rule == f"annotator:{VIDEO_ANNOTATOR}":
        raise RelationError(f"--resolve {rule}: manual labels always override the video "
                            "heuristic's; name a human annotator")
    rows = table.to_pandas()
    disagree = rows.groupby(PAIR)["label"].transform("nunique") > 1
    if not disagree.any():
        return table
    manual = (rows["annotator"] != VIDEO_ANNOTATOR).groupby([rows[c] for c in PAIR])
    lose = disagree & (rows["annotator"] == VIDEO_ANNOTATOR) & manual.transform("any")
    if rule == "majority":
        voters = rows[disagree & ~lose]
        votes = voters.groupby([*PAIR, "label"])["annotator"].transform("size")
        most = votes.groupby([voters[c] for c in PAIR]).transform("max")
        lose |= (votes < most).reindex(rows.index, fill_value=False)
    elif rule.startswith("annotator:"):
        named = rows[disagree & (rows["annotator"] == rule.partition(":")[2])]
        winner = named.set_index(PAIR)["label"]
        chosen = winner.reindex(pd.MultiIndex.from_frame(rows[PAIR])).to_numpy()
        lose |= disagree & ~np.isnan(chosen) & (rows["label"].to_numpy() != chosen)
    rows = rows[~lose]
    left = rows[rows.groupby(PAIR)["label"].transform("nunique") > 1]
    if len(left):
        a, b = left.iloc[0][PAIR]
        first = left[(left["caption_id_a"] == a) & (left["caption_id_b"] == b)]
        names = {int(label): label_name for label_name, label in PAIR_LABELS.items()}
        says = ", ".join(f"{n} {names[int(x)]}"
                         for n, x in zip(first["annotator"], first["label"], strict=True))
        count = len(left.drop_duplicates(PAIR))
        fix = {
            "refuse": "rerun import-relations with --resolve majority or --resolve annotator:NAME",
            "majority": "their votes tie; rerun with --resolve annotator:NAME",
        }.get(rule, f"{rule.partition(':')[2]} did not label it; rerun with --resolve majority "
                    "or name an annotator who did")
        raise RelationError(
            f"annotators disagree on the pair (query {a}, candidate {b}): {says} "
            f"({count} pair(s) disagree; nothing was written); {fix}"
        )
    return pa.Table.from_pandas(rows, schema=RELATIONS_SCHEMA, preserve_index=False)


def write_relations(
    root, table: pa.Table, replace_annotator: str | None = None, rule: str = "refuse"
) -> pa.Table:
    """Merge ``table`` into the dataset's relations, resolve them (:func:`resolve`) and
    write them atomically, holding the dataset's lock from the read to the rename (a
    concurrent writer waits, so neither loses the other's rows)."""
    folder = DatasetFolder(root)
    with dataset_lock(folder.root):
        merged = resolve(merge(folder.relations(), table, replace_annotator), rule)
        relations = [{"split": "train", "path": "relations/all.parquet"}]
        replace_tables(folder.root, "relations", {"all": merged},
                       configs={"relations": relations})
    return merged


def caption_ids(root) -> set[str]:
    """Every caption id of the dataset (all splits)."""
    folder = DatasetFolder(root)
    return {
        cid
        for split in SPLITS
        if (folder.root / "captions" / f"{split}.parquet").is_file()
        for cid in folder.captions(split, columns=["caption_id"]).column("caption_id").to_pylist()
    }
