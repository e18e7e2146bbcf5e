"""Writing predictions: a split's similarities with the per-query ranks of each direction, in
the one format :func:`rudder.runs.layout.read_predictions` reads (``REQUIRED_ARRAYS``)."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from rudder.atomic import atomic_savez
from rudder.evaluation import metrics


def write_predictions(path, sims, query_masks, caption_ids, video_ids, sims_v2t=None) -> Path:
    """Save scores with their per-query ranks (:func:`rudder.evaluation.metrics.query_ranks`
    of each direction), compressed, through a temporary file and a rename; returns ``path``."""
    sims = np.asarray(sims, dtype=np.float32)
    masks = np.asarray(query_masks)
    v2t = sims if sims_v2t is None else np.asarray(sims_v2t, dtype=np.float32)
    arrays = {
        "sims": sims,
        "query_masks": masks,
        "caption_ids": np.asarray(caption_ids).astype(str),
        "video_ids": np.asarray(video_ids).astype(str),
        "ranks_t2v": metrics.query_ranks(sims, masks, "t2v"),
        "ranks_v2t": metrics.query_ranks(v2t, masks, "v2t"),
    }
    if sims_v2t is not None:
        arrays["sims_v2t"] = v2t
    return atomic_savez(path, **arrays)
