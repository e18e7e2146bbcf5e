"""Precomputed per-token text features in Collaborative Experts' release format.

CE's feature release ships the text side as a pickle (e.g. ``w2v_MSRVTT_openAIGPT.pickle``):
a dict ``video_id -> list of per-caption arrays (tokens, D)``, the captions in the order of
the dataset's annotation file (albanie/collaborative-experts, ``data_loader/MSRVTT_dataset.py``
reads ``text_features[vid][caption_index]``). These captions are English (CE's releases
encode the datasets' English annotations), so rudder matches the ``k``-th English caption
of a video in the built ``captions`` table (the builders keep the release order) to entry
``k``, and refuses captions in other languages.

Pickles can run code when loaded, so this reader unpickles with the allow-list of
:mod:`rudder.safe_pickle` (plain containers, numbers, strings, numpy arrays); anything else
is refused naming the file.
Free-text queries cannot be encoded from such a file (it holds features of the dataset's
own captions only), which is said when it is asked to.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import torch

from rudder.errors import RudderError
from rudder.safe_pickle import safe_load


class CaptionFeatureError(RudderError):
    """A caption-feature file that cannot be used; the message names the file."""


class CaptionFeatureFile:
    """Token features ``(N, L, D)`` and masks ``(N, L)`` of dataset captions from a CE pickle.

    ``max_tokens`` keeps the first tokens of longer captions (like ``data.max_words``; None
    keeps all). ``lang`` is the language of the captions the pickle encodes.
    """

    lang = "en"

    def __init__(self, path, max_tokens: int | None = None):
        self.path = Path(path).expanduser()
        table = safe_load(self.path, CaptionFeatureError, "a text-feature pickle")
        if not isinstance(table, dict) or not table:
            raise CaptionFeatureError(f"{self.path}: expected a dict video_id -> list of arrays")
        first = next(iter(table.values()))
        if not isinstance(first, (list, tuple)) or not first or np.ndim(first[0]) != 2:
            raise CaptionFeatureError(
                f"{self.path}: expected each video to map to a list of (tokens, D) arrays"
            )
        self.table, self.dim, self.max_tokens = table, int(np.shape(first[0])[1]), max_tokens

    def __call__(self, texts, video_ids=None, ordinals=None) -> tuple[torch.Tensor, torch.Tensor]:
        if video_ids is None or ordinals is None:
            raise CaptionFeatureError(
                f"{self.path}: this run reads precomputed caption features, so it cannot encode "
                "free text; train with word embeddings or data.text_encoder for text queries"
            )
        arrays = [self.array(v, int(k)) for v, k in zip(video_ids, ordinals, strict=True)]
        width = max(1, max(len(a) for a in arrays))
        features = torch.zeros(len(arrays), width, self.dim)
        mask = torch.zeros(len(arrays), width, dtype=torch.bool)
        for row, array in enumerate(arrays):
            features[row, : len(array)] = torch.from_numpy(array)
            mask[row, : len(array)] = True
        return features, mask

    def array(self, video_id: str, ordinal: int) -> np.ndarray:
        """The ``(tokens, D)`` features of caption ``ordinal`` of ``video_id`` (cut to
        ``max_tokens``)."""
        captions = self.table.get(video_id)
        if captions is None:
            raise CaptionFeatureError(f"{self.path}: no features for video {video_id!r}")
        if ordinal >= len(captions):
            raise CaptionFeatureError(
                f"{self.path}: video {video_id!r} has {len(captions)} caption feature arrays "
                f"but the dataset has a caption number {ordinal + 1}"
            )
        array = np.asarray(captions[ordinal], dtype=np.float32)
        if array.ndim != 2 or array.shape[1] != self.dim:
            raise CaptionFeatureError(
                f"{self.path}: video {video_id!r} caption {ordinal}: "
                f"expected (tokens, {self.dim}), "
                f"got {array.shape}"
            )
        return array[: self.max_tokens]


class DatasetTextFeatures:
    """``data.text_encoder: dataset``: the dataset's own ``text_features`` config (token
    vectors stored at build time, e.g. from a CE pickle with ``--text-features``), read by
    :func:`rudder.data.loader.load_split`."""

    def __init__(self, folder):
        self.folder = folder
        self.dim = folder.meta.text_features_dim
        if not self.dim:
            folder.text_features_file("train")  # raises the error that says how to add them

    def __call__(self, texts, video_ids=None, ordinals=None):
        raise CaptionFeatureError(
            f"{self.folder.root}: this run reads the dataset's stored caption features, so it "
            "cannot encode free text; train with word embeddings or another data.text_encoder "
            "for text queries"
        )
