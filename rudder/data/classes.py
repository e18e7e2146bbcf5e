"""Noun/verb classes on the data side: concept ids -> multi-hot columns (:class:`ClassIndex`)
and the class sets of a video with several captions (:func:`video_class_sets`).

:mod:`rudder.data.loader` builds the split tensors with these; :mod:`rudder.supervision`
computes relevance and pair labels from the multi-hot matrices they produce.
"""

from __future__ import annotations

import torch


class ClassIndex:
    """Concept ids (str) -> columns, in sorted id order (deterministic across runs).

    Ids met later that the index does not know are *ignored* by :meth:`multi_hot`
    (``strict=False``): they count in neither the intersection nor the union of any
    pair, i.e. the caption is treated as if it had not mentioned them. Build the index
    over every split's captions (the classes are metadata, not a training signal) to
    avoid this, or pass ``strict=True`` to get an error instead.
    """

    def __init__(self, ids):
        ids = list(ids)
        if len(set(ids)) != len(ids):
            raise ValueError("ClassIndex: duplicate concept ids")
        if any(not isinstance(i, str) or not i for i in ids):
            raise ValueError("ClassIndex: concept ids must be non-empty strings")
        self.ids = ids
        self._column = {concept: column for column, concept in enumerate(ids)}

    @classmethod
    def build(cls, *class_lists_iterables) -> ClassIndex:
        """Index every id in one or more iterables of class lists (``None`` rows allowed)."""
        found = {
            c for lists in class_lists_iterables for row in lists if row is not None for c in row
        }
        return cls(sorted(found))

    def __len__(self) -> int:
        return len(self.ids)

    def __contains__(self, concept: str) -> bool:
        return concept in self._column

    def column(self, concept: str) -> int:
        return self._column[concept]

    def multi_hot(self, class_lists, strict: bool = False) -> torch.Tensor:
        """``(n, C)`` float32 multi-hot matrix; a ``None`` or empty row is all zeros.

        Repeated ids in a row count once (sets). Unknown ids are ignored unless
        ``strict``, which raises naming the row and the id.
        """
        rows, columns = [], []
        class_lists = list(class_lists)
        for r, row in enumerate(class_lists):
            if isinstance(row, str):
                raise TypeError(f"ClassIndex.multi_hot: row {r} is a str; expected a list of ids")
            for concept in row if row is not None else ():
                column = self._column.get(concept)
                if column is not None:
                    rows.append(r)
                    columns.append(column)
                elif strict:
                    raise KeyError(f"ClassIndex.multi_hot: row {r}: unknown concept id {concept!r}")
        out = torch.zeros(len(class_lists), len(self.ids), dtype=torch.float32)
        out[torch.tensor(rows, dtype=torch.long), torch.tensor(columns, dtype=torch.long)] = 1.0
        return out

    def to_dict(self) -> dict:
        return {"ids": list(self.ids)}

    @classmethod
    def from_dict(cls, data: dict) -> ClassIndex:
        return cls(data["ids"])


def binary(x, name: str) -> torch.Tensor:
    """``x`` as a (n, C) float32 0/1 tensor (nonzero = present)."""
    x = torch.as_tensor(x)
    if x.dim() != 2:
        raise ValueError(f"{name}: expected a (n, C) multi-hot matrix, got shape {tuple(x.shape)}")
    return (x != 0).to(torch.float32)


def video_class_sets(
    caption_multi_hot, caption_video, num_videos: int, rho: float = 0.25
) -> torch.Tensor:
    """``(num_videos, C)`` float32 multi-hot: the classes of a video with several captions.

    A class belongs to video ``v`` when it appears in at least ``rho`` of ``v``'s captions
    (count / n_captions >= rho, compared in float64 so that e.g. 1/4 >= 0.25 holds exactly).
    Source: docs/architecture.md's Relevance convention. Damen et al. define R between two captions;
    this threshold is rudder's way to give a video with several captions one class set.
    A video with no caption gets an empty row. ``caption_video[k]`` is the video row of
    caption ``k``.
    """
    if not 0.0 < rho <= 1.0:
        raise ValueError(f"video_class_sets: rho must be in (0, 1], got {rho}")
    captions = binary(caption_multi_hot, "caption_multi_hot")
    video = torch.as_tensor(caption_video, dtype=torch.long)
    if video.shape != (captions.shape[0],):
        raise ValueError(f"video_class_sets: caption_video must have shape ({captions.shape[0]},)")
    if video.numel() and (int(video.min()) < 0 or int(video.max()) >= num_videos):
        raise ValueError(f"video_class_sets: caption_video values must be in [0, {num_videos})")
    counts = torch.zeros(num_videos, captions.shape[1], dtype=torch.float64)
    counts.index_add_(0, video, captions.to(torch.float64))
    n_captions = torch.bincount(video, minlength=num_videos).to(torch.float64).clamp_(min=1.0)
    return ((counts > 0) & (counts / n_captions.unsqueeze(1) >= rho)).to(torch.float32)
