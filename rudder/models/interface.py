"""The model interface: what the trainer, evaluation and the search index use of a model
(:data:`MODEL_INTERFACE`), and the same as types (:class:`RetrievalModel`), so that mypy checks
each registered model class against it (as ``ce.py`` does for Collaborative Experts)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Protocol, cast, runtime_checkable

if TYPE_CHECKING:
    import torch

MODEL_INTERFACE = ("experts", "encode_text", "encode_video", "similarity", "check_values")


class RetrievalModel(Protocol):
    """:data:`MODEL_INTERFACE` as types: what a model offers besides being a
    ``torch.nn.Module`` (mypy checks each registered class against it; see ``ce.py``)."""

    experts: list[str]
    check_values: bool

    def encode_text(self, tokens: torch.Tensor,
                    mask: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]: ...

    def encode_video(self, features: Mapping[str, torch.Tensor],
                     frame_masks: Mapping[str, torch.Tensor],
                     available: torch.Tensor) -> torch.Tensor: ...

    def similarity(self, text_emb: torch.Tensor, text_logits: torch.Tensor,
                   video_emb: torch.Tensor, available: torch.Tensor,
                   check_values: bool = True) -> torch.Tensor: ...


@runtime_checkable
class TakesWordVectors(Protocol):
    """A model whose word embeddings start from pretrained vectors (``data.word_vectors``);
    optional, and checked when the model is built (``isinstance``: the method is there)."""

    def init_word_embeddings(self, vectors: torch.Tensor) -> None: ...


def interface(model: torch.nn.Module) -> RetrievalModel:
    """``model`` (built by :func:`rudder.models.build`, so it offers :data:`MODEL_INTERFACE`) as a
    :class:`RetrievalModel`, for the type checker; the same object."""
    return cast(RetrievalModel, model)
