"""The loss zoo: every retrieval loss of the papers behind one interface.

``build(name, **params)`` returns a ``torch.nn.Module`` called as
``loss(sims, relevance=None, labels=None, text_sims=None, generator=None)`` on a B x B
batch (rows captions, columns videos, diagonal positive); it returns a scalar. A loss
checks the inputs it reads (its ``requires``, plus ``optional`` ones when given) and
ignores the others. Parameter names and defaults are the loss table of docs/architecture.md;
each module documents its formula, reduction and source. A training run builds its loss as
``build(name, **params, **run_params(name, params, facts))``: parameters a loss takes from
the run (``dw``'s ``dim``, ``hn_exclusion``'s dataset ``threshold``) come from its
:meth:`RetrievalLoss.run_params`.
"""

from __future__ import annotations

import inspect

from ._base import LossConfigError, LossInputError, RetrievalLoss, RunFacts
from .distance_weighted import DistanceWeighted
from .hard_negative_exclusion import HardNegativeExclusion
from .max_margin import HardNegative, MaxMargin, Triplet
from .optimal_transport import OptimalTransport
from .partial_order import PartialOrder
from .relevance_aware import RelevanceAwareNegatives, RelevanceAwareNegativesPositives
from .relevance_margin import AdaptiveMaxMargin, RelevanceMargin
from .sms import SymmetricMultiSimilarity

__all__ = ["LossConfigError", "LossInputError", "RetrievalLoss", "RunFacts", "build", "defaults",
           "loss_class", "names", "run_params"]

_REGISTRY: dict[str, type[RetrievalLoss]] = {
    cls.name: cls
    for cls in (
        MaxMargin,
        Triplet,
        HardNegative,
        DistanceWeighted,
        OptimalTransport,
        PartialOrder,
        RelevanceAwareNegatives,
        RelevanceAwareNegativesPositives,
        RelevanceMargin,
        AdaptiveMaxMargin,
        SymmetricMultiSimilarity,
        HardNegativeExclusion,
    )
}


def names() -> tuple[str, ...]:
    """The registered loss names, in the order of the loss table of docs/architecture.md."""
    return tuple(_REGISTRY)


def loss_class(name: str) -> type[RetrievalLoss]:
    """The class of loss ``name`` (its ``requires``, ``optional`` and ``param_names``)."""
    if name not in _REGISTRY:
        raise LossConfigError(f"unknown loss {name!r}; valid names: {', '.join(_REGISTRY)}")
    return _REGISTRY[name]


def defaults(name: str) -> dict:
    """The parameters of loss ``name`` with their defaults (``None`` = required, e.g. dw's dim)."""
    parameters = inspect.signature(loss_class(name).__init__).parameters
    return {key: parameters[key].default for key in loss_class(name).param_names}


def _check_names(name: str, params: dict) -> type[RetrievalLoss]:
    cls = loss_class(name)
    unknown = sorted(set(params) - set(cls.param_names))
    if unknown:
        valid = ", ".join(f"{key}={value!r}" for key, value in defaults(name).items())
        raise LossConfigError(
            f"loss {name!r} got unknown parameter(s) {', '.join(unknown)}; "
            f"valid parameters (defaults): {valid}"
        )
    return cls


def build(name: str, **params) -> RetrievalLoss:
    """Build loss ``name`` with ``params``; unknown names or parameters are an error."""
    return _check_names(name, params)(**params)


def run_params(name: str, params: dict, run: RunFacts) -> dict:
    """The parameters of loss ``name`` that the training run supplies (from ``run``) where
    ``params`` leaves them unset (:meth:`RetrievalLoss.run_params`)."""
    cls = _check_names(name, params)
    return cls.run_params({**defaults(name), **params}, run)
