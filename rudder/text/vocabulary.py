"""A word vocabulary built from training captions, and padded token batches."""

from __future__ import annotations

from collections import Counter

import torch

PAD, UNK = 0, 1
PAD_TOKEN, UNK_TOKEN = "<pad>", "<unk>"


class Vocabulary:
    """Token <-> id map with ``PAD = 0`` and ``UNK = 1``.

    Ids 2.. follow a deterministic order: frequency descending, then the token itself
    (Unicode code-point order) for equal frequencies, so the same captions always give the
    same ids whatever order they come in.
    """

    def __init__(self, tokens: list[str]):
        tokens = list(tokens)
        if tokens[:2] != [PAD_TOKEN, UNK_TOKEN]:
            raise ValueError(
                f"Vocabulary: the first two tokens must be {PAD_TOKEN!r}, {UNK_TOKEN!r}"
            )
        if len(set(tokens)) != len(tokens):
            duplicates = sorted(t for t, n in Counter(tokens).items() if n > 1)
            raise ValueError(f"Vocabulary: duplicate tokens {duplicates[:5]}")
        self.tokens = tokens
        self._ids = {token: i for i, token in enumerate(tokens)}

    @classmethod
    def build(cls, token_lists, min_count: int = 1, max_size: int | None = None) -> Vocabulary:
        """Count tokens; keep those seen at least ``min_count`` times, the ``max_size`` most
        frequent of them when given (``max_size`` excludes the PAD and UNK entries)."""
        if min_count < 1:
            raise ValueError(f"Vocabulary.build: min_count must be >= 1, got {min_count}")
        if max_size is not None and max_size < 0:
            raise ValueError(f"Vocabulary.build: max_size must be >= 0, got {max_size}")
        counts = Counter(token for tokens in token_lists for token in tokens)
        for special in (PAD_TOKEN, UNK_TOKEN):
            counts.pop(special, None)
        kept = sorted(
            (t for t, n in counts.items() if n >= min_count), key=lambda t: (-counts[t], t)
        )
        if max_size is not None:
            kept = kept[:max_size]
        return cls([PAD_TOKEN, UNK_TOKEN, *kept])

    def __len__(self) -> int:
        return len(self.tokens)

    @property
    def table_size(self) -> int:
        """Rows of the model's embedding table for this vocabulary (one per token)."""
        return len(self.tokens)

    def __contains__(self, token: str) -> bool:
        return token in self._ids

    def encode(self, tokens) -> list[int]:
        """Ids of ``tokens``; unknown tokens map to ``UNK``."""
        ids = self._ids
        return [ids.get(token, UNK) for token in tokens]

    def decode(self, ids) -> list[str]:
        """Tokens of ``ids`` (PAD included, so strip it yourself if needed)."""
        return [self.tokens[int(i)] for i in ids]

    def batch(self, token_lists, max_len: int | None = None) -> tuple[torch.Tensor, torch.Tensor]:
        """Encode and right-pad a batch: ``(ids (B, L) long, mask (B, L) bool)``.

        ``L`` is the longest list, cut to ``max_len`` (longer lists keep their first
        ``max_len`` tokens); at least 1, so a batch of empty captions still has one
        (fully masked) column. ``mask`` is True on real tokens.
        """
        if max_len is not None and max_len < 1:
            raise ValueError(f"Vocabulary.batch: max_len must be >= 1, got {max_len}")
        encoded = [self.encode(tokens)[:max_len] for tokens in token_lists]
        if not encoded:
            raise ValueError("Vocabulary.batch: empty batch")
        lengths = torch.tensor([len(ids) for ids in encoded])
        width = max(int(lengths.max()), 1)
        ids = torch.full((len(encoded), width), PAD, dtype=torch.long)
        mask = torch.arange(width).unsqueeze(0) < lengths.unsqueeze(1)
        flat = [i for row in encoded for i in row]
        if flat:
            ids[mask] = torch.tensor(flat, dtype=torch.long)
        return ids, mask

    def to_dict(self) -> dict:
        """A JSON-serialisable form; :meth:`from_dict` restores the same ids."""
        return {"tokens": list(self.tokens)}

    @classmethod
    def from_dict(cls, data: dict) -> Vocabulary:
        if not isinstance(data, dict) or "tokens" not in data:
            raise ValueError("Vocabulary.from_dict: expected a dict with a 'tokens' list")
        return cls(data["tokens"])

    def __eq__(self, other) -> bool:
        return isinstance(other, Vocabulary) and self.tokens == other.tokens

    def __repr__(self) -> str:
        return f"Vocabulary({len(self)} tokens)"
