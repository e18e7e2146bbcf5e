"""scripts/test.sh and scripts/install_browser_deps.sh say what they install before they do it
and leave pip's and apt's progress visible: run with python, dpkg-query and apt-get replaced
by recorders on PATH (nothing is installed)."""

import os
import shutil
import stat
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


def fake(folder: Path, name: str, body: str) -> None:
    path = folder / name
    path.write_text("#!/usr/bin/env bash\n" + body, encoding="utf-8")
    path.chmod(path.stat().st_mode | stat.S_IXUSR)


@pytest.fixture
def fakes(tmp_path):
    """A PATH whose python, dpkg-query and apt-get print what they were asked; every
    browser package is missing, and apt's simulation adds chromium and upgrades libsystemd0."""
    if shutil.which("bash") is None:
        pytest.skip("needs bash")
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    fake(bin_dir, "python", 'echo "RAN python $*"\n')
    fake(bin_dir, "dpkg-query", "exit 1\n")
    fake(bin_dir, "apt-get", '''if [ "$2" = "-s" ]; then
  echo "NOTE: This is only a simulation!"
  echo "Inst libsystemd0 [252.19-1] (252.22-1 Debian:12.5/stable [amd64])"
  echo "Inst chromium (120.0.6099 Debian:12.5/stable [amd64])"
else
  echo "RAN apt-get $*"
fi
''')
    fake(bin_dir, "sudo", '"$@"\n')
    fake(bin_dir, "id", "echo 0\n")
    fake(bin_dir, "chromium", "exit 0\n")
    return {**os.environ, "PATH": f"{bin_dir}:{os.environ['PATH']}"}


def run(script: str, env) -> list[str]:
    done = subprocess.run(["bash", script], cwd=ROOT, env=env, capture_output=True, text=True,
                          timeout=120, check=False)
    assert done.returncode == 0, done.stderr
    return (done.stdout + done.stderr).splitlines()


def test_the_browser_dependencies_are_listed_with_apts_plan_before_apt_installs(fakes):
    lines = run("scripts/install_browser_deps.sh", fakes)
    assert lines[0] == ("install_browser_deps.sh: installing chromium chromium-driver "
                        "fonts-lohit-deva fonts-lohit-taml fonts-lohit-telu with apt-get "
                        "(package lists first)")
    assert lines[1] == "RAN apt-get update"
    assert lines[2:5] == ["apt-get will install 1 new package(s) and upgrade 1:",
                          "  libsystemd0 (upgrade from 252.19-1)", "  chromium (new)"]
    assert lines[5].startswith("RAN apt-get install -y chromium")


def test_test_sh_says_each_step_before_it_and_shows_pips_progress(fakes):
    lines = run("scripts/test.sh", fakes)
    ran = [line for line in lines if line.startswith("RAN python")]
    assert ran[:2] == ["RAN python -m pip install torch==2.13.0",  # no -q: pip lists its work
                       "RAN python -m pip install -e .[dev]"]
    assert ran[-1].startswith("RAN python -m pytest ")
    steps = [i for i, line in enumerate(lines) if line.startswith("== ")]
    assert [lines[i][:7] for i in steps] == ["== 1/4 ", "== 2/4 ", "== 3/4 ", "== 4/4 "]
    first_pip = lines.index(ran[0])
    assert steps[0] < first_pip and "torch==2.13.0" in lines[steps[0]]
    assert "gradio" in lines[steps[0]] and "what they depend on" in lines[steps[0]]
    assert steps[1] < lines.index("RAN apt-get update") and "chromium" in lines[steps[1]]
