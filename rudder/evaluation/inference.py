"""Similarity matrices and metrics of a model on a loaded split (video-major rows; see
docs/architecture.md)."""

from __future__ import annotations

import numpy as np
import torch

from rudder.data.loader import SplitData, VideoData
from rudder.evaluation import metrics
from rudder.supervision import relevance


@torch.no_grad()
def embed_videos(model: torch.nn.Module, data: VideoData, device, batch_size=512) -> torch.Tensor:
    """Per-expert video embeddings ``(V, E, D)`` of the whole split."""
    out = []
    for start in range(0, data.num_videos, batch_size):
        index = torch.arange(start, min(start + batch_size, data.num_videos))
        features, masks, available = data.video_batch(index, device)
        out.append(model.encode_video(features, masks, available))  # type: ignore[operator]  # a MODEL_INTERFACE method
    return torch.cat(out)


@torch.no_grad()
def similarity_matrix(model: torch.nn.Module, data: SplitData, device,
                      batch_size=512) -> torch.Tensor:
    """Caption-by-video similarities ``(V*K, V)``, rows video-major; empty slots score 0."""
    was_training = model.training
    model.eval()
    videos = embed_videos(model, data, device, batch_size)
    available = data.available.to(device)
    valid = data.caption_mask.flatten()
    videos_of, slots_of = torch.nonzero(data.caption_mask, as_tuple=True)  # row-major = video-major
    rows_of = torch.nonzero(valid).squeeze(1)
    sims = torch.zeros(len(valid), data.num_videos)
    for start in range(0, len(videos_of), batch_size):
        chunk = slice(start, start + batch_size)
        # Per chunk: the features stay ragged.
        tokens, mask = data.text_input(videos_of[chunk], slots_of[chunk])
        text, logits = model.encode_text(tokens.to(device), mask.to(device))  # type: ignore[operator]  # a MODEL_INTERFACE method
        sims[rows_of[chunk]] = (model.similarity(text, logits, videos, available)  # type: ignore[operator]  # a MODEL_INTERFACE method
                                .float().cpu())
    model.train(was_training)
    return sims


def relevance_matrix(data: SplitData, rho: float, own_video: bool = False) -> torch.Tensor | None:
    """Relevance ``(V*K, V)`` of every caption slot to every video (docs/architecture.md), or
    ``None``.

    ``own_video=False`` (the reference definition, every table unless it says otherwise): R of
    the caption's classes and the video's ``rho`` class sets. ``own_video=True``: the same,
    except that each valid caption's own video counts fully relevant (R = 1), the
    EPIC-KITCHENS-100 convention in which a clip's own narration always has R = 1 (its
    narration *is* its class source; a multi-caption video's class sets are not, so under the
    reference definition a caption's own video is often below 1).
    """
    if data.nouns is None or data.verbs is None:  # both or neither (load_split)
        return None
    classes = data.nouns.shape[-1]
    valid = data.caption_mask.flatten()
    video_nouns, video_verbs = data.video_classes(rho)
    out = relevance(data.nouns.reshape(-1, classes).float(),
                    data.verbs.reshape(-1, classes).float(), video_nouns, video_verbs)
    out[~valid] = 0
    if own_video:
        rows = torch.nonzero(valid).squeeze(1)
        out[rows, rows // data.caption_mask.shape[1]] = 1.0
    return out


def split_metrics(sims: torch.Tensor, data: SplitData, rho: float,
                  sims_v2t: torch.Tensor | None = None, own_video: bool = False) -> dict:
    """t2v and v2t retrieval metrics, nDCG and mAP (percent), and a per-language t2v breakdown.

    Every v2t metric has the same queries: the videos with a valid caption (a video
    without one has no correct answer; ``metrics.query_ranks`` leaves it out too).
    nDCG and mAP are means over the queries where they are defined (a query with no
    relevant item has none), written beside them as ``nDCG_queries`` / ``mAP_queries``;
    a metric defined for no query is ``None`` (``null`` in metrics.json, n/a in tables),
    never 0. ``own_video``: the relevance definition (:func:`relevance_matrix`).

    ``sims_v2t`` scores the video-to-text direction when it differs from ``sims`` (rank
    fusion ranks each direction separately).
    """
    masks = data.caption_mask.numpy()
    sims_np = sims.numpy()
    v2t_np = sims_np if sims_v2t is None else sims_v2t.numpy()
    result: dict[str, dict] = {
        "t2v": metrics.retrieval_metrics(sims_np, query_masks=masks, direction="t2v"),
        "v2t": metrics.retrieval_metrics(v2t_np, query_masks=masks, direction="v2t"),
    }
    rel = relevance_matrix(data, rho, own_video)
    if rel is not None:
        valid, queried = masks.reshape(-1), masks.any(1)  # v2t: videos with a valid caption
        rel_np = rel.numpy()
        for direction, s, r in (("t2v", sims_np[valid], rel_np[valid]),
                                ("v2t", v2t_np[valid].T[queried], rel_np[valid].T[queried])):
            per_query = metrics.relevance_metrics(s, r, reduction="none")  # one ranking, both
            for name, values in per_query.items():
                count = metrics.defined_queries(values)
                result[direction][name] = 100 * float(np.nanmean(values)) if count else None
                result[direction][f"{name}_queries"] = count
    langs = data.caption_langs
    result["per_language"] = metrics.per_language_metrics(sims_np, langs, query_masks=masks)
    return {k: _floats(v) for k, v in result.items()}


def _floats(value):
    """Plain floats (counts stay ints; ``None``, an undefined metric, stays ``None``)."""
    if isinstance(value, dict):
        return {k: _floats(v) for k, v in value.items()}
    if value is None or isinstance(value, int):
        return value
    return float(value)
