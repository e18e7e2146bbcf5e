"""Run folders: the files inside one (layout) and creating, resuming and loading them
(folders). The names of ``folders`` still import from here, with a DeprecationWarning
(``rudder.runs`` was that module)."""


def __getattr__(name):
    from rudder import moved_attribute

    return moved_attribute(__name__, "rudder.runs.folders", name)
