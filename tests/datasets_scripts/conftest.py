"""Helpers for the dataset builder tests: run the CLI, check that a folder loads both ways."""

import pytest

from datasets_scripts.__main__ import main
from rudder.data.layout import DatasetFolder


@pytest.fixture
def build(tmp_path):
    """``build(name, src, *flags) -> (exit code, out folder)`` through the real CLI."""

    def run(name, src, *flags, out=None):
        out = out or tmp_path / f"out-{name}"
        code = main(["build", name, "--src", str(src), "--out", str(out), *map(str, flags)])
        return code, out

    return run


@pytest.fixture
def loads(tmp_path):
    """Load ``config`` of a built folder with ``datasets.load_dataset`` (cache under tmp)."""
    datasets = pytest.importorskip("datasets")

    def load(out, config="captions"):
        DatasetFolder(out)  # rudder's own reader accepts it too
        return datasets.load_dataset(str(out), config, cache_dir=str(tmp_path / "hf-cache"))

    return load
