"""Optional heavy packages (the app's gradio, the heuristics' stanza, translation's
googletrans): imported where they are used, with an error that says which extra installs them."""

from __future__ import annotations

import importlib

from rudder.errors import RudderError


def require(module: str, extra: str):
    """``import module``, or a :class:`RudderError` naming ``pip install 'rudder[extra]'``."""
    try:
        return importlib.import_module(module)
    except ImportError:
        raise RudderError(
            f"{module} is not installed; install it with pip install 'rudder[{extra}]' "
            f"(in a checkout: pip install -e '.[{extra}]')"
        ) from None
