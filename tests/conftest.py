"""Shared fixtures: the real annotation files in ../shared/data."""

import os
from pathlib import Path

import pytest

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("HF_DATASETS_OFFLINE", "1")
os.environ.setdefault("GRADIO_ANALYTICS_ENABLED", "False")
os.environ.setdefault("HF_HUB_DISABLE_TELEMETRY", "1")

SHARED_DATA = Path(__file__).resolve().parents[1].parent / "shared" / "data"


@pytest.fixture(scope="session")
def shared_data() -> Path:
    """The folder of real annotation files; tests skip when it is absent."""
    if not SHARED_DATA.is_dir():
        pytest.skip(f"real annotation files not found at {SHARED_DATA} "
                    "(shared/ beside the checkout)")
    return SHARED_DATA
