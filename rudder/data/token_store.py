"""Per-token text features of a split, stored ragged: one (T, D) matrix of every real token
and a (V, K, L) index into it, so padding costs 8 bytes a slot instead of D floats.

At MSR-VTT scale (200,000 captions, ~9 tokens each, 300-d word2vec) the padded grid would
be ~7 GB; the ragged store is the tokens alone. Features kept in a dataset's
``text_features`` config are used straight from Arrow's buffer (no copy).
"""

from __future__ import annotations

import warnings
from dataclasses import dataclass

import numpy as np
import torch


@dataclass
class TokenStore:
    """``flat`` (T, D) token vectors; ``index`` (V, K, L) long rows of ``flat``, -1 on padding."""

    flat: torch.Tensor
    index: torch.Tensor

    @property
    def mask(self) -> torch.Tensor:
        return self.index >= 0

    def gather(self, videos: torch.Tensor, slots: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """Features ``(B, L, D)`` (zeros on padding) and mask ``(B, L)`` of these captions."""
        index = self.index[videos, slots]
        mask = index >= 0
        features = self.flat[index.clamp_min(0)]
        return torch.where(mask.unsqueeze(-1), features, 0.0), mask


def store_from_lengths(flat: torch.Tensor, starts: np.ndarray, lengths: np.ndarray, owner, slot, shape,
                       max_tokens: int | None) -> TokenStore:
    """A store whose caption ``n`` (at grid cell ``owner[n], slot[n]``) is ``flat[starts[n]:][:lengths[n]]``,
    cut to ``max_tokens`` when given."""
    if max_tokens is not None:
        lengths = np.minimum(lengths, max_tokens)
    width = max(1, int(lengths.max(initial=0)))
    j = np.arange(width)[None, :]
    rows = np.where(j < lengths[:, None], starts[:, None] + j, -1)
    index = torch.full((*shape, width), -1, dtype=torch.long)
    index[torch.as_tensor(owner), torch.as_tensor(slot)] = torch.from_numpy(rows)
    return TokenStore(flat, index)


def store_from_encoder(encoder, texts, video_ids, ordinals, owner, slot, shape, chunk: int = 2048) -> TokenStore:
    """Encode captions chunk by chunk, keeping only real tokens (``encoder`` returns padded
    ``(n, L, D)`` features and an ``(n, L)`` mask, as :mod:`rudder.text.pretrained`; it
    decides the length itself)."""
    parts, lengths = [], []
    for start in range(0, len(texts), chunk):
        part = slice(start, start + chunk)
        features, mask = encoder(texts[part], video_ids=video_ids[part], ordinals=ordinals[part])
        parts.append(features[mask])
        lengths.append(mask.sum(1).numpy())
    lengths = np.concatenate(lengths) if lengths else np.zeros(0, np.int64)
    starts = np.concatenate([[0], np.cumsum(lengths)[:-1]]).astype(np.int64)
    return store_from_lengths(torch.cat(parts), starts, lengths, owner, slot, shape, None)


def store_from_arrow(column, rows: np.ndarray, dim: int, owner, slot, shape, max_tokens: int) -> TokenStore:
    """A store over a ``list<fixed_size_list<float32, dim>>`` Arrow column; caption ``n`` is
    row ``rows[n]``. The values buffer is shared, not copied (it is never written)."""
    column = column.combine_chunks() if hasattr(column, "combine_chunks") else column
    offsets = column.offsets.to_numpy().astype(np.int64)
    values = column.flatten().flatten().to_numpy(zero_copy_only=False).reshape(-1, dim)
    with warnings.catch_warnings():  # Arrow buffers are read-only; the store only reads them
        warnings.simplefilter("ignore", UserWarning)
        flat = torch.from_numpy(values)
    starts, ends = offsets[rows], offsets[rows + 1]
    return store_from_lengths(flat, starts, ends - starts, owner, slot, shape, max_tokens)
