"""Read finished runs into per-row results: test metrics per seed, per-query ranks, per-query
nDCG/mAP; and rank-fuse the runs of several rows (Galanopoulos & Mezaris 2021).

Per-query values come from each run's test predictions (:mod:`rudder.runs.layout`: the
similarities of its ``best.pt`` on the test split, written by the trainer) and the test split's
relevance (:func:`rudder.evaluation.inference.relevance_matrix`: R of docs/architecture.md, the
run's ``rho``).
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import torch

from rudder.data.loader import SplitData, build_class_index, load_split
from rudder.errors import RunError
from rudder.evaluation import fusion, metrics
from rudder.evaluation.inference import relevance_matrix, split_metrics
from rudder.evaluation.loading import load_run
from rudder.evaluation.predictions import write_predictions
from rudder.runs.layout import (
    metrics_file,
    predictions_file,
    read_metrics,
    read_predictions,
    write_metrics,
)
from rudder.runs.trained_model import TrainedModel

DIRECTIONS = ("t2v", "v2t")


@dataclass
class RowResult:
    """One table row over seeds. ``ranks[d]`` and ``scores[d][m]`` are ``(seeds, queries)``
    arrays aligned by query (NaN = masked query); ``query_ids`` names the t2v queries."""

    label: str
    seeds: list[int]
    metrics: list[dict]  # per seed: the "test" part of read_metrics
    ranks: dict[str, np.ndarray]
    scores: dict[str, dict[str, np.ndarray]] = field(default_factory=dict)
    query_ids: np.ndarray | None = None
    run_dirs: list[Path] = field(default_factory=list)
    video_ids: np.ndarray | None = None


@dataclass
class EvalSplit:
    """The test split as a run sees it, and its caption-video relevance (None: no classes)."""

    data: SplitData
    relevance: np.ndarray | None


class EvalSplits:
    """Test splits loaded once per (dataset, languages, experts, vocabulary, sizes, rho).

    ``own_video``: the relevance definition of the suite's protocol
    (:func:`rudder.evaluation.inference.relevance_matrix`)."""

    def __init__(self, own_video: bool = False):
        self.own_video = own_video
        self._cache: dict[str, EvalSplit] = {}

    def get(self, run: TrainedModel) -> EvalSplit:
        cfg = run.config
        key = json.dumps(
            [
                str(run.dataset.root),
                cfg.data.caption_langs,
                run.experts,
                cfg.data.max_words,
                cfg.data.max_frames,
                cfg.supervision.rho,
                hashlib.sha256(
                    json.dumps(run.vocab.to_dict(), sort_keys=True).encode()
                ).hexdigest(),
            ]
        )
        if key not in self._cache:
            data = load_split(
                run.dataset,
                "test",
                run.experts,
                run.vocab,
                cfg.data.caption_langs,
                build_class_index(run.dataset),
                cfg.data.max_words,
                cfg.data.max_frames,
            )
            rel = relevance_matrix(data, cfg.supervision.rho, self.own_video)
            self._cache[key] = EvalSplit(data, None if rel is None else rel.numpy())
        return self._cache[key]


def per_query(
    sims: np.ndarray,
    masks: np.ndarray,
    relevance: np.ndarray | None,
    sims_v2t: np.ndarray | None = None,
) -> tuple[dict, dict]:
    """Per-query ranks and nDCG/mAP of one similarity matrix (video-major rows; see
    docs/architecture.md).

    Ranks: :func:`rudder.evaluation.metrics.query_ranks` (t2v one per caption row, v2t one per
    video).
    nDCG/mAP: :func:`rudder.evaluation.metrics.relevance_metrics` (``ndcg`` and
    ``mean_average_precision`` from one ranking) with ``reduction="none"`` on the valid rows
    (t2v) or on the transposed valid block (v2t), as
    :func:`rudder.evaluation.inference.split_metrics` computes their means; fractions in [0, 1], NaN
    on masked t2v rows and on videos without a valid caption (v2t). ``sims_v2t`` scores
    the v2t direction when it differs (rank fusion).
    """
    v2t = sims if sims_v2t is None else sims_v2t
    ranks = {
        "t2v": metrics.query_ranks(sims, masks, "t2v"),
        "v2t": metrics.query_ranks(v2t, masks, "v2t"),
    }
    scores: dict[str, dict[str, np.ndarray]] = {}
    if relevance is not None:
        valid = masks.reshape(-1).astype(bool)
        scores["t2v"] = _relevance_scores(sims, relevance, valid)
        # v2t queries: the videos with a valid caption, as for the ranks
        scores["v2t"] = _relevance_scores(v2t[valid].T, relevance[valid].T,
                                          masks.any(1).astype(bool))
    return ranks, scores


def _relevance_scores(sims: np.ndarray, relevance: np.ndarray, queries: np.ndarray) -> dict:
    """nDCG and mAP per row of ``sims`` (queries x items), from one ranking of each row
    (:func:`rudder.evaluation.metrics.relevance_metrics`); NaN where ``queries`` is False."""
    both = metrics.relevance_metrics(sims[queries], relevance[queries], reduction="none")
    out = {}
    for name, per_query in both.items():
        out[name] = np.full(len(queries), np.nan)
        out[name][queries] = per_query
    return out


def load_row(label: str, run_dirs: list[tuple[int, Path, Path]], splits: EvalSplits) -> RowResult:
    """A row from ``(seed, result_dir, model_dir)`` triples, in that order: ``result_dir`` holds
    test metrics and predictions (a run or a fusion); ``model_dir`` is a trained run of the same
    data config (itself, or a fusion's first member) whose test split gives the relevance."""
    seeds, tests, ids = [], [], None
    ranks: dict[str, list[Any]] = {d: [] for d in DIRECTIONS}
    scores: dict[str, Any] = {}
    video_ids = None
    for seed, run_dir, model_dir in run_dirs:
        pred = read_predictions(predictions_file(run_dir, "test"))
        query_ids = pred.caption_ids.reshape(-1)
        if ids is not None and not np.array_equal(ids, query_ids):
            raise RunError(
                f"{run_dir}: its test queries differ from the other seeds of row {label!r}"
            )
        ids, video_ids = query_ids, pred.video_ids
        relevance = splits.get(load_run(model_dir)).relevance if _needs_relevance(run_dir) else None
        r, s = per_query(pred.sims, pred.query_masks, relevance, pred.sims_v2t)
        _check_ranks(run_dir, r, pred)
        seeds.append(seed)
        tests.append(read_metrics(run_dir)["test"])
        for d in DIRECTIONS:
            ranks[d].append(r[d])
            for name, values in s.get(d, {}).items():
                scores.setdefault(d, {}).setdefault(name, []).append(values)
    return RowResult(
        label,
        seeds,
        tests,
        {d: np.stack(v) for d, v in ranks.items()},
        {d: {m: np.stack(v) for m, v in ms.items()} for d, ms in scores.items()},
        ids,
        [p for _, p, _ in run_dirs],
        video_ids,
    )


def _needs_relevance(run_dir: Path) -> bool:
    return "nDCG" in read_metrics(run_dir)["test"]["t2v"]


def _check_ranks(run_dir: Path, ranks: dict, pred) -> None:
    saved = {"t2v": pred.ranks_t2v, "v2t": pred.ranks_v2t}
    for d in DIRECTIONS:
        if not np.allclose(ranks[d], saved[d], equal_nan=True):
            raise RunError(
                f"{run_dir}: recomputed {d} ranks differ from its saved test predictions"
            )


def saved_test(run_dir: Path, splits: EvalSplits):
    """``(predictions, split, run)``: the run's saved test predictions (the similarities of its
    ``best.pt`` when it was tested), its test split as :class:`EvalSplits` loads it (for the
    relevance and caption languages), and the loaded run; the split must have the same caption
    slots as the predictions."""
    path = predictions_file(run_dir, "test")
    pred = read_predictions(path)
    run = load_run(run_dir)
    split = splits.get(run)
    same = np.array_equal(pred.caption_ids, np.asarray(split.data.caption_ids).astype(str))
    if not same or not np.array_equal(pred.query_masks, split.data.caption_mask.numpy()):
        raise RunError(
            f"{path}: its test captions differ from the test split of {run.dataset.root} now; "
            f"delete {run_dir} to train and test the run again"
        )
    return pred, split, run


def fuse_seed(
    member_dirs: list[Path], method: str, hybrid_q: int, out_dir: Path, splits: EvalSplits
) -> Path:
    """Rank-fuse one seed's member runs into ``out_dir`` (test metrics and predictions, laid
    out as a run's).

    The members' saved test similarities (the ones their rows' tables use) are fused in both
    directions by :func:`rudder.evaluation.fusion.fuse_directions` and scored by
    :func:`rudder.evaluation.inference.split_metrics` on the first member's test split, as
    ``rudder.evaluate --fuse`` scores them (in float32). No checkpoint is re-scored.
    Cached: an ``out_dir`` with both files of these members is returned as is.
    """
    digest = hashlib.sha256(
        b"".join(metrics_file(d).read_bytes() for d in member_dirs)).hexdigest()
    if (
        metrics_file(out_dir).is_file()
        and predictions_file(out_dir, "test").is_file()
        and read_metrics(out_dir).get("members_digest") == digest
    ):
        return out_dir
    first, split, run = saved_test(member_dirs[0], splits)
    preds = [first] + [read_predictions(predictions_file(d, "test")) for d in member_dirs[1:]]
    for d, p in zip(member_dirs, preds, strict=False):
        if not np.array_equal(p.caption_ids, first.caption_ids):
            raise RunError(f"{d}: its test queries differ from {member_dirs[0]}; cannot fuse")
    q = hybrid_q if method == "hybrid" else None
    t2v_scores, v2t_scores = fusion.fuse_directions(
        [p.sims for p in preds], first.query_masks, method, q
    )
    t2v = torch.as_tensor(t2v_scores, dtype=torch.float32)
    v2t = None if v2t_scores is None else torch.as_tensor(v2t_scores, dtype=torch.float32)
    result = split_metrics(t2v, split.data, run.config.supervision.rho, v2t, splits.own_video)
    write_predictions(
        predictions_file(out_dir, "test"),
        t2v.numpy(),
        first.query_masks,
        first.caption_ids,
        first.video_ids,
        None if v2t is None else v2t.numpy(),
    )
    summary = {
        "test": result,
        "members": [str(d) for d in member_dirs],
        "members_digest": digest,
        "method": method,
        "hybrid_q": q,
    }
    write_metrics(out_dir, summary)
    return out_dir
