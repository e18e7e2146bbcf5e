"""The Hugging Face Hub's offline switch, read as huggingface_hub reads it, and finite
timeouts for its HTTP session."""

from __future__ import annotations

import os
from contextlib import contextmanager


def offline_setting() -> bool | None:
    """``HF_HUB_OFFLINE``: True for 1/on/yes/true (any case), False for any other value,
    None when unset (huggingface_hub's ``constants._is_true``)."""
    value = os.environ.get("HF_HUB_OFFLINE")
    return None if value is None else value.strip().upper() in {"1", "ON", "YES", "TRUE"}


def hub_offline() -> bool:
    """Whether huggingface_hub works offline: ``HF_HUB_OFFLINE`` as set now, else what
    huggingface_hub read when it was imported."""
    setting = offline_setting()
    if setting is None:
        from huggingface_hub import constants

        return bool(constants.HF_HUB_OFFLINE)
    return setting


@contextmanager
def bounded_session(connect: float, transfer: float):
    """huggingface_hub's shared HTTP session with finite timeouts within the block (it has
    none): ``connect`` seconds to connect, ``transfer`` seconds per read or write."""
    import httpx2
    from huggingface_hub import get_session

    session = get_session()
    previous = session.timeout
    session.timeout = httpx2.Timeout(transfer, connect=connect)
    try:
        yield
    finally:
        session.timeout = previous
