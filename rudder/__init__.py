"""rudder: multilingual, low-resource text-video retrieval.

Submodules are imported on demand (``from rudder import metrics, losses``) so that
``import rudder`` stays fast.
"""

__version__ = "0.1.0"
