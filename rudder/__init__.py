"""rudder: multilingual, low-resource text-video retrieval.

The public API of docs/architecture.md ('Public API'), importable from here:
``rudder.losses`` (``losses.build``), ``rudder.models`` (``models.build``),
``rudder.metrics`` (:mod:`rudder.evaluation.metrics`), ``rudder.load_text_encoder``
(:func:`rudder.text.encoders.load_text_encoder`), ``rudder.TrainedModel``
(:class:`rudder.runs.trained_model.TrainedModel`) and ``rudder.load_run``
(:func:`rudder.evaluation.loading.load_run`). They are imported on first use, so that
``import rudder`` stays fast and loads neither torch nor any optional extra.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING

__version__ = "0.1.0"

_PUBLIC = {
    "losses": ("rudder.losses", None),
    "models": ("rudder.models", None),
    "metrics": ("rudder.evaluation.metrics", None),
    "load_text_encoder": ("rudder.text.encoders", "load_text_encoder"),
    "TrainedModel": ("rudder.runs.trained_model", "TrainedModel"),
    "load_run": ("rudder.evaluation.loading", "load_run"),
}
"""Public name -> (module, attribute of that module, or None for the module itself)."""

__all__ = ["TrainedModel", "__version__", "load_run", "load_text_encoder", "losses", "metrics",
           "models"]

if TYPE_CHECKING:
    from rudder import losses as losses
    from rudder import models as models
    from rudder.evaluation import metrics as metrics
    from rudder.evaluation.loading import load_run as load_run
    from rudder.runs.trained_model import TrainedModel as TrainedModel
    from rudder.text.encoders import load_text_encoder as load_text_encoder


def __getattr__(name: str):
    if name not in _PUBLIC:
        raise AttributeError(f"module 'rudder' has no attribute {name!r}")
    module_name, attribute = _PUBLIC[name]
    module = importlib.import_module(module_name)
    value = module if attribute is None else getattr(module, attribute)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *_PUBLIC})
