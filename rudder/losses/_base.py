"""Shared base of the loss zoo: the call contract, input checks, anchor views, reductions.

Every loss is called as ``loss(sims, relevance=None, labels=None, text_sims=None,
generator=None)`` on a B x B batch (rows captions, columns videos, diagonal positive) and
returns a scalar. A loss declares the inputs it ``requires`` and the ones it reads when
given (``optional``); inputs it does not read are ignored, the ones it reads are checked.

Anchor views. Both retrieval directions are handled at once by stacking a matrix ``M``
(indexed caption x video) into ``(2, B, B)``: ``view[0, a, b] = M[a, b]`` (caption anchor
``a``, video candidate ``b``) and ``view[1, a, b] = M[b, a]`` (video anchor ``a``, caption
candidate ``b``) -- the anchor/candidate rule of docs/architecture.md. The positive of anchor
``a`` in both directions is ``sims[a, a]``.

Run facts. A parameter that depends on the training run (the model's embedding dimension,
a threshold over the training set) is filled in by the run, not by the user: the loss
names it in :meth:`RetrievalLoss.run_params`, reading what it needs from a
:class:`RunFacts`; the run records the values in its ``config.yaml``.
"""

from __future__ import annotations

import math
import numbers
from collections.abc import Callable
from typing import ClassVar, Protocol

import torch
from torch import nn

from rudder.errors import RudderError
from rudder.labels import PairLabel


class LossConfigError(RudderError):
    """A loss name or parameter that cannot be built."""


class LossInputError(ValueError):
    """An input a loss cannot use: missing, wrong shape, dtype, device or range."""


class RunFacts(Protocol):
    """What a training run tells a loss about itself (``rudder.training.batch_supervision`` answers
    it).

    A fact of the data is ``None`` while the data are not read yet (a config checked before
    its run): a loss then builds without it.
    """

    @property
    def embedding_dim(self) -> int:
        """The dimension of the model's (unit) embeddings (read only)."""

    def caption_similarity_threshold(self, top_fraction: float,
                                     other_videos: bool = False) -> float | None:
        """The caption-caption similarity above which the top ``top_fraction`` of all training
        caption pairs lie (:meth:`rudder.text.CaptionSimilarity.top_fraction_threshold`);
        with ``other_videos``, of the pairs of captions of different videos."""


class RetrievalLoss(nn.Module):
    """Base class: validates the inputs, then calls :meth:`compute` with the ones it reads.

    ``check_values`` (True by default) also checks the values: ``sims`` and ``text_sims``
    finite, ``relevance`` in [0, 1], ``labels`` in {0..3}. Reading values back makes a CUDA
    host wait for the GPU, so the trainer turns it off (it makes these inputs itself and
    checks the loss once per epoch); shapes, dtypes and devices are always checked.
    """

    name: ClassVar[str] = ""
    requires: tuple[str, ...] = ()  # an instance may set its own from its params (ot)
    optional: ClassVar[tuple[str, ...]] = ()
    param_names: ClassVar[tuple[str, ...]] = ()
    check_values: bool = True

    def forward(self, sims, relevance=None, labels=None, text_sims=None, generator=None):
        given = {"relevance": relevance, "labels": labels, "text_sims": text_sims,
                 "generator": generator}
        check_sims(sims, self.name, self.check_values)
        for key in self.requires:
            if given[key] is None:
                raise LossInputError(
                    f"loss {self.name!r} needs `{key}` ({_HOW_TO_GET[key]}); "
                    f"pass {key}=... when calling it"
                )
        used = {}
        for key in self.requires + self.optional:
            if given[key] is not None:
                used[key] = _CHECKS[key](given[key], sims, self.name, self.check_values)
        return self.compute(sims, **used)

    @classmethod
    def run_params(cls, params: dict, run: RunFacts) -> dict:
        """The parameters the training run supplies: ``{name: value}`` from ``run``, for
        parameters ``params`` (every parameter, defaults filled in) leaves unset. None by
        default; ``rudder.losses.run_params`` calls it."""
        return {}

    # Each loss defines ``compute(self, sims, <the inputs it declares>) -> Tensor``; the
    # keywords differ per loss, so the base class declares only that it is callable.
    compute: Callable[..., torch.Tensor]

    def extra_repr(self) -> str:
        return ", ".join(f"{key}={value!r}" for key, value in self.hparams().items())

    def hparams(self) -> dict:
        """The constructor parameters of this loss and their values."""
        return {key: getattr(self, key) for key in self.param_names}


_HOW_TO_GET = {
    "relevance": "a B x B float matrix in [0, 1], caption i vs video j, from "
                 "rudder.supervision.relevance",
    "labels": "a B x B integer matrix of pair labels (rudder.labels.PairLabel: 0 negative, "
              "1 partial, 2 positive, 3 description), from rudder.supervision.batch_labels",
    "text_sims": "a B x B caption-caption similarity matrix, e.g. "
                 "rudder.text.CaptionSimilarity.pairwise",
    "generator": "a torch.Generator on the device of sims, e.g. torch.Generator().manual_seed(0)",
}


# ----------------------------------------------------------------------------- input checks


def check_sims(sims, loss_name: str, check_values: bool = True) -> None:
    """``sims`` must be a floating, square B x B tensor with B >= 2, and finite when
    ``check_values``."""
    if not isinstance(sims, torch.Tensor):
        raise LossInputError(
            f"loss {loss_name!r}: `sims` must be a torch.Tensor, got {type(sims).__name__}"
        )
    if not sims.is_floating_point():
        raise LossInputError(
            f"loss {loss_name!r}: `sims` must be a floating-point tensor, got {sims.dtype}; "
            "convert it with sims.float()"
        )
    if sims.dim() != 2 or sims.shape[0] != sims.shape[1]:
        raise LossInputError(
            f"loss {loss_name!r}: `sims` must be a square B x B matrix (captions x videos of "
            f"one batch, diagonal positive), got shape {tuple(sims.shape)}"
        )
    if sims.shape[0] < 2:
        raise LossInputError(
            f"loss {loss_name!r}: `sims` is {tuple(sims.shape)}; a batch needs at least 2 "
            "pairs to have negatives"
        )
    if check_values and not bool(torch.isfinite(sims).all()):
        raise LossInputError(
            f"loss {loss_name!r}: `sims` contains NaN or infinite values at "
            f"{_first_bad(~torch.isfinite(sims))}"
        )


def _check_matrix(value, sims, loss_name: str, key: str) -> None:
    if not isinstance(value, torch.Tensor):
        raise LossInputError(
            f"loss {loss_name!r}: `{key}` must be a torch.Tensor, got {type(value).__name__}"
        )
    if tuple(value.shape) != tuple(sims.shape):
        raise LossInputError(
            f"loss {loss_name!r}: `{key}` has shape {tuple(value.shape)} but `sims` has "
            f"{tuple(sims.shape)}; both must be the same B x B batch"
        )
    if value.device != sims.device:
        raise LossInputError(
            f"loss {loss_name!r}: `{key}` is on {value.device} but `sims` is on {sims.device}; "
            f"move it with {key}.to(sims.device)"
        )


def check_relevance(relevance, sims, loss_name: str, check_values: bool = True) -> torch.Tensor:
    """A B x B float matrix with every value in [0, 1] (values checked when ``check_values``);
    returned in the dtype of ``sims``."""
    _check_matrix(relevance, sims, loss_name, "relevance")
    relevance = relevance.detach().to(sims.dtype)
    if not check_values:
        return relevance
    bad = ~((relevance >= 0) & (relevance <= 1))  # also catches NaN
    if bool(bad.any()):
        where = _first_bad(bad)
        raise LossInputError(
            f"loss {loss_name!r}: `relevance` must lie in [0, 1]; relevance{list(where)} = "
            f"{relevance[where].item()!r}"
        )
    return relevance


def check_labels(labels, sims, loss_name: str, check_values: bool = True) -> torch.Tensor:
    """A B x B integer matrix of pair labels in {0, 1, 2, 3} (:class:`rudder.labels.PairLabel`;
    values checked when ``check_values``)."""
    _check_matrix(labels, sims, loss_name, "labels")
    if labels.is_floating_point() or labels.is_complex() or labels.dtype == torch.bool:
        raise LossInputError(
            f"loss {loss_name!r}: `labels` must be an integer tensor (0 negative, 1 partial, "
            f"2 positive, 3 description), got {labels.dtype}"
        )
    if not check_values:
        return labels
    bad = (labels < min(PairLabel)) | (labels > max(PairLabel))
    if bool(bad.any()):
        where = _first_bad(bad)
        raise LossInputError(
            f"loss {loss_name!r}: `labels` values must be in {{0, 1, 2, 3}}; "
            f"labels{list(where)} = {int(labels[where])} (unknown pairs, -1, must be resolved "
            "before the loss, e.g. by rudder.supervision.batch_labels)"
        )
    return labels


def check_text_sims(text_sims, sims, loss_name: str, check_values: bool = True) -> torch.Tensor:
    """A B x B caption-caption similarity matrix, finite (checked when ``check_values``)."""
    _check_matrix(text_sims, sims, loss_name, "text_sims")
    if not text_sims.is_floating_point():
        raise LossInputError(
            f"loss {loss_name!r}: `text_sims` must be a floating-point tensor, got "
            f"{text_sims.dtype}"
        )
    if check_values and not bool(torch.isfinite(text_sims).all()):
        raise LossInputError(
            f"loss {loss_name!r}: `text_sims` contains NaN or infinite values at "
            f"{_first_bad(~torch.isfinite(text_sims))}"
        )
    return text_sims.detach()


def check_generator(generator, sims, loss_name: str, check_values: bool = True) -> torch.Generator:
    """A torch.Generator on the device type of ``sims``."""
    if not isinstance(generator, torch.Generator):
        raise LossInputError(
            f"loss {loss_name!r}: `generator` must be a torch.Generator, got "
            f"{type(generator).__name__}"
        )
    if generator.device.type != sims.device.type:
        raise LossInputError(
            f"loss {loss_name!r}: `generator` is on {generator.device} but `sims` is on "
            f"{sims.device}; create it with torch.Generator(device=sims.device)"
        )
    return generator


_CHECKS = {
    "relevance": check_relevance,
    "labels": check_labels,
    "text_sims": check_text_sims,
    "generator": check_generator,
}


def _first_bad(mask: torch.Tensor) -> tuple[int, ...]:
    return tuple(int(i) for i in mask.nonzero()[0])


# ----------------------------------------------------------------------------- parameters


def check_number(loss_name: str, key: str, value, *, low=None, high=None,
                 low_open=False, high_open=False) -> float:
    """A finite real parameter inside [low, high] (open ends where asked)."""
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        raise LossConfigError(
            f"loss {loss_name!r}: parameter {key!r} must be a number, got {value!r}"
        )
    value = float(value)
    too_low = low is not None and (value <= low if low_open else value < low)
    too_high = high is not None and (value >= high if high_open else value > high)
    if not math.isfinite(value) or too_low or too_high:
        left = "(" if low_open else "["
        right = ")" if high_open else "]"
        span = f"{left}{'-inf' if low is None else low}, {'inf' if high is None else high}{right}"
        raise LossConfigError(
            f"loss {loss_name!r}: parameter {key!r} must be a finite number in {span}, "
            f"got {value!r}"
        )
    return value


def check_int(loss_name: str, key: str, value, *, low: int) -> int:
    """An integer parameter >= low."""
    if isinstance(value, bool) or not isinstance(value, numbers.Integral) or value < low:
        raise LossConfigError(
            f"loss {loss_name!r}: parameter {key!r} must be an integer >= {low}, got {value!r}"
        )
    return int(value)


def check_bool(loss_name: str, key: str, value) -> bool:
    """A boolean parameter (true/false)."""
    if not isinstance(value, bool):
        raise LossConfigError(
            f"loss {loss_name!r}: parameter {key!r} must be true or false, got {value!r}"
        )
    return value


def check_choice(loss_name: str, key: str, value, choices: tuple[str, ...]) -> str:
    """A parameter that names one of ``choices``."""
    if value not in choices:
        raise LossConfigError(
            f"loss {loss_name!r}: parameter {key!r} must be one of "
            f"{', '.join(repr(c) for c in choices)}, got {value!r}"
        )
    return value


def sum_off_diagonal(terms: torch.Tensor) -> torch.Tensor:
    """Sum of (2, B, B) terms over the 2B(B-1) off-diagonal entries (diagonal ignored)."""
    keep = off_diagonal(terms.shape[-1], terms.device)
    return terms.masked_fill(~keep, 0).sum()


# ----------------------------------------------------------------------------- helpers


def anchor_view(matrix: torch.Tensor) -> torch.Tensor:
    """Stack a caption x video matrix into (2, B, B) anchor-major form (module docstring)."""
    return torch.stack((matrix, matrix.T))


def positives(sims: torch.Tensor) -> torch.Tensor:
    """(2, B, 1): the positive similarity ``sims[a, a]`` of every anchor in both directions."""
    return sims.diagonal().view(1, -1, 1).expand(2, -1, 1)


def off_diagonal(size: int, device) -> torch.Tensor:
    """(B, B) bool, True off the diagonal."""
    return ~torch.eye(size, dtype=torch.bool, device=device)


def mean_off_diagonal(terms: torch.Tensor) -> torch.Tensor:
    """Mean of (2, B, B) terms over the 2B(B-1) off-diagonal entries (diagonal ignored)."""
    size = terms.shape[-1]
    keep = off_diagonal(size, terms.device)
    return terms.masked_fill(~keep, 0).sum() / (2 * size * (size - 1))


def hardest(values: torch.Tensor, allowed: torch.Tensor) -> torch.Tensor:
    """(2, B, 1): per anchor the largest of (2, B, B) ``values`` over ``allowed`` candidates.

    ``-inf`` where an anchor has no allowed candidate, so a hinge on it is 0 (VSE++'s
    ``masked_fill(mask, 0).max(1)`` on the costs gives the same). When several candidates
    tie for the maximum the gradient is shared among them (``amax``).
    """
    return values.masked_fill(~allowed, float("-inf")).amax(dim=-1, keepdim=True)


def direction_means(per_anchor: torch.Tensor) -> torch.Tensor:
    """(2, B, 1) per-anchor terms -> the mean over the anchors of each direction, summed."""
    return per_anchor.mean(dim=(1, 2)).sum()
