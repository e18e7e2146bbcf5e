"""The loss zoo: every retrieval loss of the papers behind one interface.

``build(name, **params)`` returns a ``torch.nn.Module`` called as
``loss(sims, relevance=None, labels=None, text_sims=None, generator=None)`` on a B x B
batch (rows captions, columns videos, diagonal positive); it returns a scalar. A loss
checks the inputs it reads (its ``requires``, plus ``optional`` ones when given) and
ignores the others. Parameter names and defaults are DESIGN.md's table; each module
documents its formula, reduction and source.
"""

from __future__ import annotations

import inspect

from ._base import LossConfigError, LossInputError, RetrievalLoss
from .distance_weighted import DistanceWeighted
from .hard_negative_exclusion import HardNegativeExclusion
from .max_margin import HardNegative, MaxMargin, Triplet
from .optimal_transport import OptimalTransport
from .partial_order import PartialOrder
from .relevance_aware import RelevanceAwareNegatives, RelevanceAwareNegativesPositives
from .relevance_margin import AdaptiveMaxMargin, RelevanceMargin
from .sms import SymmetricMultiSimilarity

__all__ = ["LossConfigError", "LossInputError", "RetrievalLoss", "build", "defaults", "names"]

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
    """The registered loss names, in DESIGN.md's table order."""
    return tuple(_REGISTRY)


def _lookup(name: str) -> type[RetrievalLoss]:
    if name not in _REGISTRY:
        raise LossConfigError(f"unknown loss {name!r}; valid names: {', '.join(_REGISTRY)}")
    return _REGISTRY[name]


def defaults(name: str) -> dict:
    """The parameters of loss ``name`` with their defaults (``None`` = required, e.g. dw's dim)."""
    parameters = inspect.signature(_lookup(name).__init__).parameters
    return {key: parameters[key].default for key in _lookup(name).param_names}


def build(name: str, **params) -> RetrievalLoss:
    """Build loss ``name`` with ``params``; unknown names or parameters are an error."""
    cls = _lookup(name)
    unknown = sorted(set(params) - set(cls.param_names))
    if unknown:
        valid = ", ".join(f"{key}={value!r}" for key, value in defaults(name).items())
        raise LossConfigError(
            f"loss {name!r} got unknown parameter(s) {', '.join(unknown)}; "
            f"valid parameters (defaults): {valid}"
        )
    return cls(**params)
