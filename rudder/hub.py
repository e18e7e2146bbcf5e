"""The Hugging Face Hub's offline switch, read as huggingface_hub reads it."""

from __future__ import annotations

import os


def offline_setting() -> bool | None:
    """``HF_HUB_OFFLINE``: True for 1/on/yes/true (any case), False for any other value,
    None when unset (huggingface_hub's ``constants._is_true``)."""
    value = os.environ.get("HF_HUB_OFFLINE")
    return None if value is None else value.strip().upper() in {"1", "ON", "YES", "TRUE"}
