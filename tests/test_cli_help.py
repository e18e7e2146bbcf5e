"""Every command line prints its help and exits 0 (DESIGN.md: CLI entry points)."""

import subprocess
import sys

import pytest

COMMANDS = [
    ["rudder.train"],
    ["rudder.evaluate"],
    ["rudder.data.sample"],
    ["heuristics"],
    ["heuristics", "label"],
    ["heuristics", "train-tagger"],
    ["datasets_scripts"],
    ["datasets_scripts", "build"],
    ["datasets_scripts", "translate"],
    ["datasets_scripts", "publish"],
    ["app"],
    ["experiments.run"],
    ["experiments.tune"],
]


@pytest.mark.parametrize("command", COMMANDS, ids=" ".join)
def test_help(command):
    done = subprocess.run(
        [sys.executable, "-m", *command, "--help"], capture_output=True, text=True, timeout=120, check=False
    )
    assert done.returncode == 0, done.stderr[-2000:]
    assert "usage:" in done.stdout
