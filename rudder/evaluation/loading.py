"""Loading a trained model for inference from any reference a command takes: a run folder
or checkpoint (:meth:`rudder.runs.trained_model.TrainedModel.from_checkpoint`), a published
folder or an ``hf://`` Hub id (:func:`rudder.hub.published_models.load`).

torch and the model are imported inside the functions that load a run, so command lines
that only import this module start fast.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from rudder.runs.trained_model import TrainedModel


def load_run(path, device="cpu", dataset: str | None = None) -> TrainedModel:
    """The :class:`~rudder.runs.trained_model.TrainedModel` of a run directory, checkpoint,
    published model folder or ``hf://`` Hub id on ``dataset`` (default: the one it was
    trained on), in eval mode on ``device``."""
    from rudder.hub import published_models
    from rudder.runs.trained_model import TrainedModel

    if published_models.is_model_reference(path):
        return published_models.load(path, device, dataset)
    return TrainedModel.from_checkpoint(path, device, dataset)
