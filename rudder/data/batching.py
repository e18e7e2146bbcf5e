"""Training batches in which every video appears at most once (docs/architecture.md: Batches)."""

from __future__ import annotations

import numpy as np
import torch


def epoch_batches(
    caption_mask: torch.Tensor,
    batch_size: int,
    generator: torch.Generator,
    mode: str = "random",
    pairs: torch.Tensor | None = None,
    pinning: str = "both",
    share: float = 1.0,
) -> list[tuple[torch.Tensor, torch.Tensor]]:
    """The ``(video_index, caption_slot)`` batches of one epoch.

    ``random`` follows Collaborative Experts: each video once per epoch with one caption slot
    drawn uniformly among its valid ones. ``all`` visits every valid caption once: round r
    holds the r-th caption (in a random order per video) of every video with more than r
    captions, and batches never cross rounds, so a batch holds each video at most once.
    Videos without a valid caption are skipped. A round's last batch may be smaller; a lone
    leftover video joins the batch before it (a batch of one has no negative). A round that
    holds one video only (it has more captions than any other) joins the latest earlier
    batch without that video; when every earlier batch holds it, that caption is left out
    (it can happen when each round fits in one batch, or rounds of two videos both hold it).
    The order depends only on ``generator``.

    ``pairs`` (``random`` mode only) makes the sampler relation-aware: an ``(M, 4)`` long
    tensor of annotated caption pairs ``(video_a, slot_a, video_b, slot_b)`` between two
    different videos (e.g. from :meth:`rudder.supervision.RelationTable.pairs`; pairs
    naming an invalid caption slot are ignored). Each epoch
    the pairs are visited in a random order and a pair is kept when neither of its videos
    is taken yet (a random maximal set of video-disjoint pairs); a kept pair's two captions
    are the slots of its videos and always land in the same batch, so its manual label
    reaches the loss. The other videos draw their slot uniformly as in ``random``. Batches
    then hold ``batch_size`` rounded down to an even number of videos (pairs never
    straddle two batches).

    ``pinning`` says which pairs an epoch may keep and whose captions it fixes. ``both``
    (default): every pair, both captions pinned, so a video in many pairs trains mostly on
    its annotated captions. ``drawn``: only a pair one of whose captions is the slot its
    video drew uniformly this epoch, and only the other video is pinned; the drawn video's
    captions keep their uniform frequency, and each pair is kept in about ``1 / n`` of the
    epochs (``n`` the captions of the drawing video). ``share`` caps the kept pairs at
    ``floor(share * V / 2)`` (``V`` the videos with a caption), i.e. at most that share of
    the epoch's videos are in kept pairs; 1.0 sets no cap beyond disjointness.
    """
    num_videos, num_slots = caption_mask.shape
    has_caption = caption_mask.any(1)
    # A random key per (video, slot); invalid slots sort last.
    keys = torch.rand(num_videos, num_slots, generator=generator)
    keys[~caption_mask] = 2.0
    slot_order = keys.argsort(1)
    if pairs is not None:
        if mode != "random":
            raise ValueError("relation-aware batches need caption sampling 'random'")
        return _paired_batches(caption_mask, slot_order[:, 0], pairs, batch_size, generator,
                               pinning, share)
    if mode == "random":
        rounds = [(torch.nonzero(has_caption).squeeze(1), slot_order[:, 0])]
    elif mode == "all":
        counts = caption_mask.sum(1)
        rounds = [
            (torch.nonzero(counts > r).squeeze(1), slot_order[:, r])
            for r in range(int(counts.max()))
        ]
    else:
        raise ValueError(f"caption sampling {mode!r} is not 'random' or 'all'")
    batches: list[tuple[torch.Tensor, torch.Tensor]] = []
    for videos, slots in rounds:
        videos = videos[torch.randperm(len(videos), generator=generator)]
        if len(videos) == 1:
            _join_earlier(batches, videos, slots)
        else:
            batches += _chunks(videos, slots, batch_size)
    return batches


def _join_earlier(batches: list, video: torch.Tensor, slots: torch.Tensor) -> None:
    """Add a round's lone video to the latest batch that does not hold it, if any."""
    for i in range(len(batches) - 1, -1, -1):
        videos, batch_slots = batches[i]
        if not bool((videos == video).any()):
            batches[i] = (torch.cat([videos, video]), torch.cat([batch_slots, slots[video]]))
            return


def _chunks(videos: torch.Tensor, slots: torch.Tensor, batch_size: int):
    chunks = list(torch.split(videos, batch_size))
    if len(chunks) > 1 and len(chunks[-1]) == 1:
        chunks[-2:] = [torch.cat(chunks[-2:])]
    return [(chunk, slots[chunk]) for chunk in chunks if len(chunk) >= 2]


def _paired_batches(caption_mask, slots, pairs, batch_size, generator, pinning="both",
                    share=1.0):
    """``random`` batches in which a random maximal set of video-disjoint pairs (among those
    ``pinning`` allows, at most ``share`` of the videos) sits together."""
    if pinning not in ("both", "drawn"):
        raise ValueError(f"relation-aware batches: pinning {pinning!r} is not 'both' or 'drawn'")
    if not 0.0 < share <= 1.0:
        raise ValueError(f"relation-aware batches: share {share!r} is not in (0, 1]")
    pairs = torch.as_tensor(pairs, dtype=torch.long).reshape(-1, 4)
    if bool((pairs[:, 0] == pairs[:, 2]).any()):
        raise ValueError("relation-aware batches: a pair joins two captions of one video")
    has_caption = caption_mask.any(1)
    pairs = pairs[caption_mask[pairs[:, 0], pairs[:, 1]] & caption_mask[pairs[:, 2], pairs[:, 3]]]
    if pinning == "drawn":  # a pair of which one caption is its video's uniform draw
        pairs = pairs[(slots[pairs[:, 0]] == pairs[:, 1]) | (slots[pairs[:, 2]] == pairs[:, 3])]
    most = int(share * int(has_caption.sum())) // 2
    slots = slots.clone()
    taken = np.zeros(len(has_caption), dtype=bool)
    kept: list[tuple[int, int]] = []
    for va, sa, vb, sb in pairs[torch.randperm(len(pairs), generator=generator)].tolist():
        if len(kept) == most:
            break
        if not (taken[va] or taken[vb]):  # one pass over the pairs per epoch, not per batch
            taken[va] = taken[vb] = True
            slots[va], slots[vb] = sa, sb
            kept.append((va, vb))
    singles = torch.nonzero(has_caption & ~torch.from_numpy(taken)).squeeze(1)
    singles = singles[torch.randperm(len(singles), generator=generator)]
    odd = singles[len(singles) - len(singles) % 2:]
    blocks = torch.cat([torch.tensor(kept, dtype=torch.long).reshape(-1, 2),
                        singles[: len(singles) - len(odd)].reshape(-1, 2)])
    blocks = blocks[torch.randperm(len(blocks), generator=generator)]
    videos = torch.cat([blocks.reshape(-1), odd])
    return _chunks(videos, slots, max(2, batch_size - batch_size % 2))
