"""The per-query data behind a suite's tables: ``experiments/results/<suite>-ranks.npz``.

One compressed numpy archive (``np.savez_compressed``; read with ``allow_pickle=False``, so
it can hold no code), holding for every run of every table row (a fusion row's fused models
included) and each direction the rank of each query's own item, and its nDCG and mAP where
the data have classes; with each run's seed, run key and the git commit it was trained at,
the dataset fingerprint, and the report's text that does not come from the ranks (the
header). ``python -m experiments.report SUITE`` recomputes every table and test from it.

Arrays (R runs, Q text-to-video query slots = videos x caption slots, video-major, V videos):

- ``format``: :data:`FORMAT`; ``meta``: a JSON document (suite, rows in order, the
  comparisons with "best" resolved, per row its runs at the epoch cap, the header and notes);
- ``run_label``, ``run_key``, ``run_commit``: (R,) strings; ``run_seed``: (R,) int64 (-1: a
  fusion of every seed pooled into one model); ``dataset_fingerprint``: a string;
- ``query_ids``: (Q,) caption ids ("" for an empty slot); ``video_ids``: (V,);
- ``t2v_rank``: (R, Q) float32, ``v2t_rank``: (R, V) float32: 0-based tie-averaged ranks
  (multiples of 0.5, exact in float32), NaN where a slot has no query;
- ``t2v_nDCG``, ``t2v_mAP``, ``v2t_nDCG``, ``v2t_mAP``: (R, Q) / (R, V) float32 per-query
  values in [0, 1], NaN where undefined (present when the data have classes); the tables
  are computed from these float32 values (their means agree with ``metrics.json`` to about
  1e-7).
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np

from rudder.atomic import atomic_savez

from .collect import DIRECTIONS, RowResult

FORMAT = "rudder-suite-ranks/1"
SCORES = ("nDCG", "mAP")


class ArchiveError(ValueError):
    """An archive that cannot be read as a suite's ranks."""


def archive_path(output: Path, name: str) -> Path:
    return Path(output) / f"{name}-ranks.npz"


def write_archive(path: Path, rows: dict[str, RowResult], runs: dict[str, list[dict]],
                  fingerprint: str, meta: dict) -> Path:
    """Write ``rows`` (in order) to ``path``; ``runs[label]``: per run of the row, in its
    order, ``{"key": ..., "commit": ...}``."""
    labels, seeds, keys, commits = [], [], [], []
    arrays: dict[str, list] = {f"{d}_rank": [] for d in DIRECTIONS}
    has_scores = all(row.scores for row in rows.values())
    ids = None
    for label, row in rows.items():
        if ids is None:
            ids = row.query_ids
        elif row.query_ids is not None and not np.array_equal(ids, row.query_ids):
            raise ArchiveError(f"row {label!r} ranks other test queries than the first row")
        for i, seed in enumerate(row.seeds):
            labels.append(label)
            seeds.append(seed)
            keys.append(runs[label][i]["key"])
            commits.append(runs[label][i]["commit"])
            for d in DIRECTIONS:
                arrays[f"{d}_rank"].append(row.ranks[d][i])
                for name in SCORES if has_scores else ():
                    arrays.setdefault(f"{d}_{name}", []).append(row.scores[d][name][i])
    if ids is None:
        raise ArchiveError("no row names its test queries (RowResult.query_ids): the archive "
                           "keeps the caption id of each query slot")
    first = next(iter(rows.values()))
    videos = first.video_ids if first.video_ids is not None else np.array([], dtype=str)
    data = {
        "format": np.array(FORMAT),
        "meta": np.array(json.dumps(meta, sort_keys=True, ensure_ascii=False)),
        "run_label": np.array(labels, dtype=str),
        "run_seed": np.array(seeds, dtype=np.int64),
        "run_key": np.array(keys, dtype=str),
        "run_commit": np.array(commits, dtype=str),
        "dataset_fingerprint": np.array(fingerprint),
        "query_ids": np.array(["" if q is None else str(q) for q in ids], dtype=str),
        "video_ids": np.asarray(videos, dtype=str),
    }
    for name, values in arrays.items():
        stacked = np.stack(values).astype(np.float32)
        if name.endswith("_rank") and not np.array_equal(stacked, np.stack(values), equal_nan=True):
            raise ArchiveError(f"{name}: ranks not exact in float32")
        data[name] = stacked
    return atomic_savez(path, **data)


def _query_ids(stored: np.ndarray) -> np.ndarray:
    """The archived caption ids as objects, None for an empty slot ("" in the archive)."""
    ids = stored.astype(object)
    ids[stored == ""] = None
    return ids


def read_archive(path: Path) -> tuple[dict[str, RowResult], dict]:
    """The rows (in their table order) and the meta document of an archive."""
    path = Path(path)
    try:
        with np.load(path, allow_pickle=False) as npz:
            data = {key: npz[key] for key in npz.files}
    except (OSError, ValueError, EOFError) as error:
        raise ArchiveError(f"{path}: not a readable ranks archive ({error})") from None
    if str(data.get("format", "")) != FORMAT:
        raise ArchiveError(f"{path}: not a {FORMAT} archive (format "
                           f"{str(data.get('format', 'missing'))!r})")
    try:
        meta = json.loads(str(data["meta"]))
        labels = data["run_label"].tolist()
        rows = {}
        for label in meta["rows"]:
            where = [i for i, x in enumerate(labels) if x == label]
            if not where:
                raise ArchiveError(f"{path}: row {label!r} has no run")
            scores = {d: {name: data[f"{d}_{name}"][where].astype(np.float64)
                          for name in SCORES if f"{d}_{name}" in data}
                      for d in DIRECTIONS}
            rows[label] = RowResult(
                label,
                [int(s) for s in data["run_seed"][where]],
                [],
                {d: data[f"{d}_rank"][where].astype(np.float64) for d in DIRECTIONS},
                {d: s for d, s in scores.items() if s},
                _query_ids(data["query_ids"]),
                video_ids=data["video_ids"],
            )
        meta["runs"] = [
            {"label": label, "seed": int(seed), "key": str(key), "commit": str(commit)}
            for label, seed, key, commit in zip(labels, data["run_seed"], data["run_key"],
                                                data["run_commit"], strict=True)
        ]
        meta["dataset_fingerprint"] = str(data["dataset_fingerprint"])
    except (KeyError, TypeError, ValueError) as error:
        raise ArchiveError(f"{path}: malformed ranks archive ({error!r})") from None
    return rows, meta
