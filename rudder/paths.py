"""Where rudder keeps its caches: one function, so every cache agrees on the folder."""

from __future__ import annotations

import os
from pathlib import Path


def cache_dir(*parts: str) -> Path:
    """``$RUDDER_CACHE`` (unset or empty: ``~/.cache/rudder``), joined with ``parts``."""
    return Path(os.environ.get("RUDDER_CACHE")
                or Path.home() / ".cache" / "rudder").joinpath(*parts)
