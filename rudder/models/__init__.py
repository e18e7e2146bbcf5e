"""Retrieval models, built from the config by name: ``models.build(config, experts, vocab_size)``.

:data:`MODELS` (declared in :mod:`rudder.config.schema`, filled here) maps ``model.name`` to
a function that imports and returns the model's class; the default ``ce`` is Collaborative
Experts (Liu et al., BMVC 2019) with its parts (NetVLAD, gated units, collaborative gating).
Classes are imported when built, so that reading a :class:`ModelConfig` (every command line
does, before ``--help``) does not import torch.

A model is a ``torch.nn.Module`` constructed as ``cls(config: ModelConfig, experts:
{name: ExpertInfo}, vocab_size: int | None)`` that offers :data:`MODEL_INTERFACE`, which is
all the trainer, evaluation and the search index use:

- ``experts``: the expert names it reads, sorted (the column order of ``available``);
- ``encode_text(tokens, mask) -> (text, logits)``;
- ``encode_video(features, frame_masks, available) -> video``;
- ``similarity(text, logits, video, available, check_values=True) -> (captions, videos)``;
- ``check_values``: a bool attribute; the trainer sets it False for validated data, so
  that no value check reads a tensor back to the host in a GPU step;
- optionally ``init_word_embeddings(vectors)``, for ``data.word_vectors``.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING

from rudder.config.schema import MODELS, ModelClass
from rudder.errors import ConfigError
from rudder.models.config import ModelConfig
from rudder.models.interface import (
    MODEL_INTERFACE,
    RetrievalModel,
    TakesWordVectors,
    interface,
)

if TYPE_CHECKING:
    import torch

    from rudder.models.ce import CollaborativeExperts

__all__ = ["MODELS", "MODEL_INTERFACE", "CollaborativeExperts", "ModelConfig", "RetrievalModel",
           "build", "interface", "model_class"]


def _collaborative_experts() -> type[CollaborativeExperts]:
    from rudder.models.ce import CollaborativeExperts

    return CollaborativeExperts


# model.name -> the model's class, imported when called (rudder.config accepts these names)
MODELS.register("ce", _collaborative_experts)


def model_class(name: str) -> ModelClass:
    """The class registered as ``name`` in :data:`MODELS`."""
    return MODELS.pick(name)()


def build(config: ModelConfig, experts: Mapping, vocab_size: int | None,
          word_vectors: torch.Tensor | None = None) -> torch.nn.Module:
    """The model ``config.name`` for these experts (name -> ``ExpertInfo``) and vocabulary size;
    ``word_vectors`` (``vocab_size`` x ``config.word_dim``) initialise its word embeddings.

    Every place that makes a model (training, loading a run) calls this; a model missing part
    of :data:`MODEL_INTERFACE` is an error naming what it lacks.
    """
    model = model_class(config.name)(config, experts, vocab_size)
    missing = [name for name in MODEL_INTERFACE if not hasattr(model, name)]
    if missing:
        raise TypeError(
            f"model {config.name!r} ({type(model).__name__}) lacks {missing} (see rudder.models)"
        )
    if word_vectors is not None:
        if not isinstance(model, TakesWordVectors):
            raise ConfigError(
                f"model {config.name!r} takes no word vectors; unset data.word_vectors"
            )
        model.init_word_embeddings(word_vectors)
    return model


def __getattr__(name: str):
    if name == "CollaborativeExperts":
        from rudder.models.ce import CollaborativeExperts

        return CollaborativeExperts
    raise AttributeError(f"module 'rudder.models' has no attribute {name!r}")
