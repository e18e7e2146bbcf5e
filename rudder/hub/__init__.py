"""The Hugging Face Hub: its offline switch (offline), published models (models), their files
and card (model_card) and the publish command (publish). The names of ``offline`` still
import from here, with a DeprecationWarning (``rudder.hub`` was that module)."""


def __getattr__(name):
    if name.startswith("__"):
        raise AttributeError(name)
    import importlib

    offline = importlib.import_module("rudder.hub.offline")
    if not hasattr(offline, name):
        raise AttributeError(f"module 'rudder.hub' has no attribute {name!r}")
    from rudder import warn_moved

    warn_moved(f"rudder.hub.{name}", f"rudder.hub.offline.{name}")
    return getattr(offline, name)
