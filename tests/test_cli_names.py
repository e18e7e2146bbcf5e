"""What the command lines call themselves and list: the prog under the name it was started
by (a checkout's ``app`` or an installed wheel's ``rudder.app``), and the loss names."""

import importlib
import importlib.util
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


def test_train_help_lists_every_registered_loss(capsys):
    from rudder import losses
    from rudder.train import LOSS_NAMES, build_parser

    assert LOSS_NAMES == losses.names()
    help_text = " ".join(build_parser().format_help().split())
    assert f"loss name (loss.name): {', '.join(losses.names())};" in help_text
    assert "default runs/<time>-<name>-<loss>" in help_text


@pytest.mark.parametrize(
    "folder, module, command",
    [
        ("app", "__main__", "{}"),
        ("heuristics", "__main__", "{}"),
        ("datasets_scripts", "__main__", "{}"),
        ("experiments", "run", "{}.run"),
        ("experiments", "tune", "{}.tune"),
    ],
)
@pytest.mark.parametrize("installed", [False, True], ids=["checkout", "wheel"])
def test_prog_is_the_name_it_was_started_by(monkeypatch, folder, module, command, installed):
    """A wheel maps the folder to ``rudder.<folder>`` (pyproject's package-dir): load the
    module under that name, as ``python -m rudder.<folder>`` does."""
    package = f"rudder.{folder}" if installed else folder
    if installed:
        monkeypatch.setitem(sys.modules, package, importlib.import_module(folder))
    spec = importlib.util.spec_from_file_location(
        f"{package}.{module}", ROOT / folder / f"{module}.py"
    )
    loaded = importlib.util.module_from_spec(spec)
    monkeypatch.setitem(sys.modules, spec.name, loaded)  # dataclasses look their module up
    spec.loader.exec_module(loaded)
    assert loaded.build_parser().prog == "python -m " + command.format(package)


def test_run_folder_naming_is_the_same_in_code_help_and_docs():
    import re

    from rudder.runs.folders import default_run_dir
    from rudder.train import build_parser

    assert re.fullmatch(r"\d{8}-\d{6}-ce-mm", default_run_dir("ce-mm").name)  # <time>-<name>-<loss>
    form = "runs/<time>-<name>-<loss>"
    assert form in " ".join(build_parser().format_help().split())
    assert f"`{form}`, time as `YYYYmmdd-HHMMSS`" in (ROOT / "docs" / "config.md").read_text()
