"""``python -m rudder.evaluate``: the evaluate command. Imported, this name is the
module :mod:`rudder.evaluation.evaluate` itself (one module object: patching either name reaches the
code)."""

import importlib
import sys

if __name__ == "__main__":
    importlib.import_module("rudder.evaluation.evaluate").cli()
else:
    sys.modules[__name__] = importlib.import_module("rudder.evaluation.evaluate")
