"""Plain ``pytest`` from the repository root runs this checkout (pyproject's ``pythonpath``).

The subprocesses start pytest as its console script does: a launcher script outside the
checkout (so its own folder, not the current one, goes on ``sys.path``) and no PYTHONPATH,
so without the setting the top-level folders are missing, or an installed copy of rudder
elsewhere (an editable install of another checkout) is imported instead.
"""

import os
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
LAUNCHER = "import sys, pytest\nsys.exit(pytest.console_main())\n"  # what bin/pytest runs


def run_plain_pytest(*args, timeout=600):
    """``pytest ARGS`` from the repository root, started as the console script starts it."""
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    with tempfile.TemporaryDirectory() as folder:
        launcher = Path(folder) / "pytest_launcher.py"
        launcher.write_text(LAUNCHER)
        return subprocess.run(
            [sys.executable, str(launcher), "-p", "no:cacheprovider", *args],
            check=False, cwd=ROOT, env=env, capture_output=True, text=True, timeout=timeout,
        )


def test_top_level_packages_come_from_this_checkout():
    import app
    import datasets_scripts
    import experiments
    import heuristics
    import rudder

    for module in (app, datasets_scripts, experiments, heuristics, rudder):
        assert Path(module.__file__).resolve().parents[1] == ROOT, module.__file__


def test_plain_pytest_from_the_root_imports_this_checkout():
    result = run_plain_pytest(
        "-q", "tests/test_pytest_setup.py::test_top_level_packages_come_from_this_checkout"
    )
    assert result.returncode == 0, result.stdout + result.stderr
    assert "1 passed" in result.stdout


@pytest.mark.slow
def test_plain_pytest_collects_the_whole_suite():
    result = run_plain_pytest("--collect-only", "-q")
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    assert " error" not in result.stdout.splitlines()[-1]
