"""Training batches in which every video appears at most once (DESIGN.md: Batches)."""

from __future__ import annotations

import torch


def epoch_batches(
    caption_mask: torch.Tensor,
    batch_size: int,
    generator: torch.Generator,
    mode: str = "random",
) -> list[tuple[torch.Tensor, torch.Tensor]]:
    """The ``(video_index, caption_slot)`` batches of one epoch.

    ``random`` follows Collaborative Experts: each video once per epoch with one caption slot
    drawn uniformly among its valid ones. ``all`` visits every valid caption once: round r
    holds the r-th caption (in a random order per video) of every video with more than r
    captions, and batches never cross rounds, so a batch holds each video at most once.
    Videos without a valid caption are skipped. A round's last batch may be smaller; a lone
    leftover video joins the batch before it (a batch of one has no negative). The order depends only on ``generator``.
    """
    num_videos, num_slots = caption_mask.shape
    has_caption = caption_mask.any(1)
    # A random key per (video, slot); invalid slots sort last.
    keys = torch.rand(num_videos, num_slots, generator=generator)
    keys[~caption_mask] = 2.0
    slot_order = keys.argsort(1)
    if mode == "random":
        rounds = [(torch.nonzero(has_caption).squeeze(1), slot_order[:, 0])]
    elif mode == "all":
        counts = caption_mask.sum(1)
        rounds = [
            (torch.nonzero(counts > r).squeeze(1), slot_order[:, r]) for r in range(int(counts.max()))
        ]
    else:
        raise ValueError(f"caption sampling {mode!r} is not 'random' or 'all'")
    batches = []
    for videos, slots in rounds:
        videos = videos[torch.randperm(len(videos), generator=generator)]
        chunks = list(torch.split(videos, batch_size))
        if len(chunks) > 1 and len(chunks[-1]) == 1:
            chunks[-2:] = [torch.cat(chunks[-2:])]
        batches += [(chunk, slots[chunk]) for chunk in chunks if len(chunk) >= 2]
    return batches
