"""``python -m rudder.publish``: the publish command. Imported, this name is the
module :mod:`rudder.hub.publish` itself (one module object: patching either name reaches the
code)."""

import importlib
import sys

if __name__ == "__main__":
    importlib.import_module("rudder.hub.publish").cli()
else:
    sys.modules[__name__] = importlib.import_module("rudder.hub.publish")
