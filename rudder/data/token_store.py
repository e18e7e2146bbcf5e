"""Per-token text features of a split, stored ragged: one (T, D) matrix of every real token
and a (V, K, L) index into it, so padding costs 8 bytes a slot instead of D floats.

At MSR-VTT scale (200,000 captions, ~9 tokens each, 300-d word2vec) the padded grid would
be ~7 GB; the ragged store is the tokens alone. A dataset's ``text_features`` config is
decoded row group by row group into the store.
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

    def gather(self, videos: torch.Tensor,
               slots: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """Features ``(B, L, D)`` (zeros on padding) and mask ``(B, L)`` of these captions."""
        index = self.index[videos, slots]
        mask = index >= 0
        features = self.flat[index.clamp_min(0)]
        return torch.where(mask.unsqueeze(-1), features, 0.0), mask


def store_from_lengths(flat: torch.Tensor, starts: np.ndarray, lengths: np.ndarray, owner, slot,
                       shape, max_tokens: int | None) -> TokenStore:
    """A store whose caption ``n`` (at grid cell ``owner[n], slot[n]``) is
    ``flat[starts[n]:][:lengths[n]]``, cut to ``max_tokens`` when given."""
    if max_tokens is not None:
        lengths = np.minimum(lengths, max_tokens)
    width = max(1, int(lengths.max(initial=0)))
    j = np.arange(width)[None, :]
    rows = np.where(j < lengths[:, None], starts[:, None] + j, -1)
    index = torch.full((*shape, width), -1, dtype=torch.long)
    index[torch.as_tensor(owner), torch.as_tensor(slot)] = torch.from_numpy(rows)
    return TokenStore(flat, index)


def store_from_encoder(encoder, texts, video_ids, ordinals, owner, slot, shape,
                       chunk: int = 256, desc: str = "encoding captions", langs=None
                       ) -> TokenStore:
    """Encode captions chunk by chunk, keeping only real tokens (``encoder`` returns padded
    ``(n, L, D)`` features and an ``(n, L)`` mask, as :mod:`rudder.text.pretrained`; it
    decides the length itself). An encoder with ``uses_langs`` also gets each caption's
    language (``langs``). A progress bar (``desc``) counts the captions on a terminal."""
    from rudder.progress import progress

    parts: list[torch.Tensor] = []
    chunk_lengths: list[np.ndarray] = []
    with_langs = getattr(encoder, "uses_langs", False)
    with progress(total=len(texts), desc=desc, unit="caption") as bar:
        for start in range(0, len(texts), chunk):
            part = slice(start, start + chunk)
            extra = {"langs": langs[part]} if with_langs else {}
            features, mask = encoder(texts[part], video_ids=video_ids[part],
                                     ordinals=ordinals[part], **extra)
            parts.append(features[mask])
            chunk_lengths.append(mask.sum(1).numpy())
            bar.update(len(texts[part]))
    lengths = np.concatenate(chunk_lengths) if chunk_lengths else np.zeros(0, np.int64)
    starts = np.concatenate([[0], np.cumsum(lengths)[:-1]]).astype(np.int64)
    return store_from_lengths(torch.cat(parts), starts, lengths, owner, slot, shape, None)


def store_from_parquet(file, wanted_ids, dim: int, owner, slot, shape,
                       max_tokens: int) -> TokenStore:
    """A store over a ``text_features`` parquet file (caption_id, feature: list<fixed_size_list
    <float32, dim>>) for the captions ``wanted_ids`` (in grid order ``owner``/``slot``).

    Row groups are decoded one at a time into one preallocated (T, dim) matrix, sized from
    the file's metadata, so the peak is that matrix plus one row group (reading the whole
    table first and concatenating its chunks would hold the data twice).
    Raises ``KeyError`` with the first wanted caption id that the file lacks.
    """
    row_of = {c: r for r, c in enumerate(file.read(columns=["caption_id"]).column(0).to_pylist())}
    rows = np.array([row_of.get(c, -1) for c in wanted_ids], dtype=np.int64)
    if (rows < 0).any():
        raise KeyError(wanted_ids[int(np.argmax(rows < 0))])
    meta = file.metadata
    leaf = [file.schema.column(j).path.startswith("feature")
            for j in range(meta.num_columns)].index(True)
    capacity = sum(meta.row_group(i).column(leaf).num_values
                   for i in range(meta.num_row_groups)) // dim
    flat = torch.empty(capacity, dim)
    offset_parts, written = [np.zeros(1, np.int64)], 0
    for i in range(meta.num_row_groups):
        for chunk in file.read_row_group(i, columns=["feature"]).column(0).chunks:
            ends = chunk.offsets.to_numpy().astype(np.int64)
            values = chunk.flatten().flatten().to_numpy(zero_copy_only=False).reshape(-1, dim)
            with warnings.catch_warnings():  # a read-only Arrow buffer, only read here
                warnings.simplefilter("ignore", UserWarning)
                flat[written : written + len(values)] = torch.from_numpy(values)
            offset_parts.append(ends[1:] - ends[0] + written)
            written += len(values)
    offsets = np.concatenate(offset_parts)
    starts, ends = offsets[rows], offsets[rows + 1]
    return store_from_lengths(flat[:written], starts, ends - starts, owner, slot, shape, max_tokens)
