"""rudder: multilingual, low-resource text-video retrieval.

Submodules are imported on demand (``from rudder.evaluation import metrics``) so that
``import rudder`` stays fast. The library is grouped by role (docs/architecture.md, 'Layout');
the module names it had before that grouping still import, as the same module objects, with a
DeprecationWarning naming the new place.
"""

import importlib
import importlib.abc
import importlib.util
import os
import sys
import types
import warnings

__version__ = "0.1.0"

MOVED_MODULES = {
    "rudder.trainer": "rudder.training.trainer",
    "rudder.batch_supervision": "rudder.training.batch_supervision",
    "rudder.optim": "rudder.training.optim",
    "rudder.distributed": "rudder.training.distributed",
    "rudder.devices": "rudder.training.devices",
    "rudder.checkpoints": "rudder.training.checkpoints",
    "rudder.step_audit": "rudder.training.step_audit",
    "rudder.metrics": "rudder.evaluation.metrics",
    "rudder.metric_names": "rudder.evaluation.metric_names",
    "rudder.significance": "rudder.evaluation.significance",
    "rudder.selection": "rudder.evaluation.selection",
    "rudder.fusion": "rudder.evaluation.fusion",
    "rudder.inference": "rudder.evaluation.inference",
    "rudder.results_table": "rudder.evaluation.results_table",
    "rudder.query_langs": "rudder.evaluation.query_langs",
    "rudder.index": "rudder.search.index",
    "rudder.index_cache": "rudder.search.index_cache",
    "rudder.index_faiss": "rudder.search.index_faiss",
    "rudder.topk": "rudder.search.topk",
    "rudder.run_layout": "rudder.runs.layout",
    "rudder.model_hub": "rudder.hub.models",
    "rudder.model_card": "rudder.hub.model_card",
}
"""Old module name -> where the module lives now."""


_PACKAGE_DIR = os.path.dirname(os.path.abspath(__file__))
_IMPORTLIB_DIR = os.path.dirname(os.path.abspath(importlib.__file__))


def _is_import_machinery(filename: str) -> bool:
    """importlib's frames and rudder's package ``__init__`` files, which only pass an import on."""
    if filename.startswith("<frozen importlib"):
        return True
    path = os.path.abspath(filename)
    return (os.path.dirname(path) == _IMPORTLIB_DIR
            or (os.path.basename(path) == "__init__.py"
                and os.path.commonpath([path, _PACKAGE_DIR]) == _PACKAGE_DIR))


def _skipped_by_warnings(filename: str) -> bool:
    """Frames ``warnings.warn`` leaves out when it counts ``stacklevel`` (CPython's
    ``_is_internal_frame``: importlib's bootstrap)."""
    return "importlib" in filename and "_bootstrap" in filename


def warn_moved(old: str, new: str) -> None:
    """A DeprecationWarning that ``old`` is now ``new``, attributed to the code that imported it
    (past the import machinery), so Python's default filters show it in a script."""
    frame: types.FrameType | None = sys._getframe(1)
    level = 2
    while frame is not None and _is_import_machinery(frame.f_code.co_filename):
        if not _skipped_by_warnings(frame.f_code.co_filename):
            level += 1
        frame = frame.f_back
    warnings.warn(f"{old} is now {new}; import it from there", DeprecationWarning,
                  stacklevel=level)


def moved_attribute(package: str, module: str, name: str):
    """``package.name``, now ``module.name`` (``package`` was that module before it became a
    package), with a DeprecationWarning: the ``__getattr__`` of such a package."""
    if name.startswith("__"):
        raise AttributeError(name)
    target = importlib.import_module(module)
    if not hasattr(target, name):
        raise AttributeError(f"module {package!r} has no attribute {name!r}")
    warn_moved(f"{package}.{name}", f"{module}.{name}")
    return getattr(target, name)


class _MovedModuleLoader(importlib.abc.Loader):
    """Loads an old module name as the module object at its new name (one object, two names)."""

    def __init__(self, new_name: str):
        self.new_name = new_name
        self.real_spec = None

    def create_module(self, spec):
        warn_moved(spec.name, self.new_name)
        module = importlib.import_module(self.new_name)
        self.real_spec = module.__spec__
        return module

    def exec_module(self, module):
        module.__spec__ = self.real_spec  # the import system set the alias's spec on it


class _MovedModuleFinder(importlib.abc.MetaPathFinder):
    def find_spec(self, fullname, path=None, target=None):
        new_name = MOVED_MODULES.get(fullname)
        if new_name is None:
            return None
        return importlib.util.spec_from_loader(fullname, _MovedModuleLoader(new_name))


if not any(isinstance(finder, _MovedModuleFinder) for finder in sys.meta_path):
    sys.meta_path.append(_MovedModuleFinder())
