"""Run folders: the files inside one (layout) and creating, resuming and loading them
(folders). ``from rudder.runs import load_run`` and the other names of ``folders`` still
import from here, loaded on first use."""


def __getattr__(name):
    if name.startswith("__"):
        raise AttributeError(name)
    import importlib

    folders = importlib.import_module("rudder.runs.folders")
    try:
        return getattr(folders, name)
    except AttributeError:
        raise AttributeError(f"module 'rudder.runs' has no attribute {name!r}") from None
