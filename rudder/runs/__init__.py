"""Run folders: the files inside one (layout) and creating, resuming and loading them
(folders). The names of ``folders`` still import from here, with a DeprecationWarning
(``rudder.runs`` was that module)."""


def __getattr__(name):
    if name.startswith("__"):
        raise AttributeError(name)
    import importlib

    folders = importlib.import_module("rudder.runs.folders")
    if not hasattr(folders, name):
        raise AttributeError(f"module 'rudder.runs' has no attribute {name!r}")
    from rudder import warn_moved

    warn_moved(f"rudder.runs.{name}", f"rudder.runs.folders.{name}")
    return getattr(folders, name)
