"""The Hugging Face Hub: its offline switch (offline), published models (models), their files
and card (model_card) and the publish command (publish). The names of ``offline`` still
import from here, with a DeprecationWarning (``rudder.hub`` was that module)."""


def __getattr__(name):
    from rudder import moved_attribute

    return moved_attribute(__name__, "rudder.hub.offline", name)
