"""Embedding and scoring, with the same numbers on every path; relevance and split metrics.

The trainer's validation and test passes, ``rudder.evaluate`` (of a run or a published
folder) and the app's search all compute similarities through :func:`embed_texts`,
:func:`embed_videos` and :func:`similarities` (:func:`similarity_matrix` composes them for a
split, rows video-major; see docs/architecture.md). float32 results depend on how the work is
cut: torch's CPU matrix products take other code paths for a few rows than for many, and
MKL's split of a product between threads changes with the thread count. So every forward
pass and every similarity product here has one shape: ``TEXT_BLOCK`` text rows and
``BLOCK`` video rows (a short last block is padded with copies of its last row and cut off
again), captions are padded to ``max_words`` tokens and variable-length experts to
``max_frames`` frames, and on the CPU the work runs on one intra-op thread. A caption's
similarity to a video is then the same bits whatever else is in its batch, in whichever
order, on whichever of these paths (on one machine: another CPU or a GPU rounds
differently).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager

import numpy as np
import torch

from rudder.data.loader import SplitData, VideoData
from rudder.evaluation import metrics
from rudder.models import interface
from rudder.supervision import relevance

BLOCK = 256  # video rows of every video forward pass and similarity product
# Text rows of every text forward pass and similarity product: few, because one search
# query pays for a whole block (benchmarks/bench_app_search.py), and enough that a pass over
# thousands of captions costs about what 256-row blocks cost.
TEXT_BLOCK = 32

TextInput = Callable[[torch.Tensor], tuple[torch.Tensor, torch.Tensor]]  # rows -> model input


@contextmanager
def scoring(model: torch.nn.Module, device):
    """The model in eval mode and, on the CPU, one intra-op thread; both restored after."""
    was_training, threads = model.training, torch.get_num_threads()
    on_cpu = torch.device(device).type == "cpu"
    model.eval()
    if on_cpu:
        torch.set_num_threads(1)
    try:
        yield
    finally:
        if on_cpu:
            torch.set_num_threads(threads)
        model.train(was_training)


def blocks(count: int, size: int = BLOCK) -> Iterator[tuple[int, int, torch.Tensor]]:
    """``(start, stop, rows)`` covering ``range(count)`` in blocks of ``size``: ``rows`` always
    holds ``size`` indices, the last block's tail repeating ``stop - 1``."""
    for start in range(0, count, size):
        stop = min(start + size, count)
        yield start, stop, torch.arange(start, start + size).clamp_max(stop - 1)


def pad_steps(values: torch.Tensor, mask: torch.Tensor,
              steps: int) -> tuple[torch.Tensor, torch.Tensor]:
    """``values`` (B, L, ...) and ``mask`` (B, L) padded with zeros / False to ``steps``
    along L (tokens or frames); longer inputs are returned as they are."""
    missing = steps - mask.shape[1]
    if missing <= 0:
        return values, mask
    return (torch.cat([values, values.new_zeros(len(values), missing, *values.shape[2:])], 1),
            torch.cat([mask, mask.new_zeros(len(mask), missing)], 1))


@torch.no_grad()
def embed_videos(model: torch.nn.Module, data: VideoData, device,
                 max_frames: int) -> torch.Tensor:
    """Per-expert video embeddings ``(V, E, D)`` of every video of ``data``, on ``device``."""
    device, out = torch.device(device), []
    with scoring(model, device):
        for start, stop, rows in blocks(data.num_videos):
            features, masks, available = data.video_batch(rows, device)
            for expert, mask in masks.items():
                features[expert], masks[expert] = pad_steps(features[expert], mask, max_frames)
            video = interface(model).encode_video(features, masks, available)
            out.append(video[: stop - start])
    return torch.cat(out)


def _text_blocks(model: torch.nn.Module, text_input: TextInput, count: int, device,
                 max_words: int) -> Iterator[tuple[int, int, torch.Tensor, torch.Tensor]]:
    """``(start, stop, text, logits)`` of the texts ``0..count-1`` in padded blocks (the model
    already in :func:`scoring` mode)."""
    for start, stop, rows in blocks(count, TEXT_BLOCK):
        tokens, mask = pad_steps(*text_input(rows), max_words)
        text, logits = interface(model).encode_text(tokens.to(device), mask.to(device))
        yield start, stop, text, logits


@torch.no_grad()
def embed_texts(model: torch.nn.Module, text_input: TextInput, count: int, device,
                max_words: int) -> tuple[torch.Tensor, torch.Tensor]:
    """Per-expert embeddings ``(count, E, D)`` and mixture logits ``(count, E)`` of ``count``
    texts; ``text_input(rows)`` gives the model's input (tokens or features, mask) of ``rows``."""
    device = torch.device(device)
    with scoring(model, device):
        parts = [(text[: stop - start], logits[: stop - start]) for start, stop, text, logits
                 in _text_blocks(model, text_input, count, device, max_words)]
    return torch.cat([p[0] for p in parts]), torch.cat([p[1] for p in parts])


class _VideoBlocks:
    """The embedded videos cut into padded blocks once, for many text blocks."""

    def __init__(self, videos: torch.Tensor, available: torch.Tensor, device):
        videos, available = videos.to(device), available.to(device)
        self.count = len(videos)
        self.blocks = [(videos[rows], available[rows]) for _, _, rows in blocks(self.count)]

    def score(self, model: torch.nn.Module, text: torch.Tensor, logits: torch.Tensor,
              rows: int) -> torch.Tensor:
        """Similarities ``(rows, V)`` on the host of a padded text block's first ``rows``."""
        out = torch.cat([interface(model).similarity(text, logits, video, available)
                         for video, available in self.blocks], 1)
        return out[:rows, : self.count].float().cpu()


@torch.no_grad()
def similarities(model: torch.nn.Module, text: torch.Tensor, logits: torch.Tensor,
                 videos: torch.Tensor, available: torch.Tensor) -> torch.Tensor:
    """Similarities ``(T, V)`` (float32, on the host) of embedded texts (:func:`embed_texts`)
    to embedded videos (:func:`embed_videos`) with availability ``(V, E)``."""
    device = text.device
    video_blocks = _VideoBlocks(videos, available, device)
    out = torch.empty(len(text), len(videos))
    with scoring(model, device):
        for start, stop, rows in blocks(len(text), TEXT_BLOCK):
            out[start:stop] = video_blocks.score(model, text[rows].to(device),
                                                 logits[rows].to(device), stop - start)
    return out


@torch.no_grad()
def similarity_matrix(model: torch.nn.Module, data: SplitData, device, max_words: int,
                      max_frames: int) -> torch.Tensor:
    """Embed a split and score it: caption-by-video similarities ``(V*K, V)``, rows
    video-major; empty slots score 0. ``max_words`` and ``max_frames`` are the run's."""
    device = torch.device(device)
    video_blocks = _VideoBlocks(embed_videos(model, data, device, max_frames), data.available,
                                device)
    valid = data.caption_mask.flatten()
    videos_of, slots_of = torch.nonzero(data.caption_mask, as_tuple=True)  # video-major
    rows_of = torch.nonzero(valid).squeeze(1)
    sims = torch.zeros(len(valid), data.num_videos)
    with scoring(model, device):
        for start, stop, text, logits in _text_blocks(
                model, lambda rows: data.text_input(videos_of[rows], slots_of[rows]),
                len(rows_of), device, max_words):
            sims[rows_of[start:stop]] = video_blocks.score(model, text, logits, stop - start)
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
