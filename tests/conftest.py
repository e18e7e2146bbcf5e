"""Shared fixtures: the real annotation files in ../shared/data and a tiny dataset in the real
layout (with fast training flags), so training tests run in seconds."""

import os
from pathlib import Path

import pytest

from .factories import concept_dataset

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


@pytest.fixture(scope="session")
def tiny_dataset(tmp_path_factory):
    return concept_dataset(tmp_path_factory.mktemp("data") / "tiny")


@pytest.fixture
def fast_args():
    """CLI flags that make a training run take a second or two."""
    return ["--epochs", "2", "--set", "data.batch_size=8", "--set", "model.shared_dim=16",
            "--set", "model.word_dim=8", "--set", "model.text_vlad_clusters=2",
            "--set", "model.video_vlad_clusters=2", "--set", "data.caption_langs=[mr, en]",
            "--set", "data.audio_langs=[mr]"]


@pytest.fixture
def train_tiny(tiny_dataset, fast_args):
    """``train_tiny(out_dir, *flags)``: rudder.train.main on the tiny dataset, fast settings."""
    from rudder import train

    def run(out, *extra):
        return train.main(["--dataset", str(tiny_dataset), "--output-dir", str(out), *fast_args,
                           *extra])

    return run
