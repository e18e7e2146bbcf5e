"""rudder: multilingual, low-resource text-video retrieval.

Submodules are imported on demand (``from rudder.evaluation import metrics``) so that
``import rudder`` stays fast. The library is grouped by role (docs/architecture.md, 'Layout');
the module names it had before that grouping still import, as the same module objects, with a
DeprecationWarning naming the new place.
"""

import importlib
import importlib.abc
import importlib.util
import sys
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


class _MovedModuleLoader(importlib.abc.Loader):
    """Loads an old module name as the module object at its new name (one object, two names)."""

    def __init__(self, new_name: str):
        self.new_name = new_name
        self.real_spec = None

    def create_module(self, spec):
        warnings.warn(f"{spec.name} is now {self.new_name}; import it from there",
                      DeprecationWarning, stacklevel=3)
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
