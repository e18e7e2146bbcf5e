"""Staging folders: removed on errors, Ctrl-C and SIGTERM, and after kill -9 at the next start."""

import os
import signal
import subprocess
import sys

import pytest

from heuristics.staging import publish, remove_stale, staging

HOLD = """
import sys, time
from heuristics.staging import staging
with staging(sys.argv[1], "en") as stage:
    (stage / "pos").mkdir()
    print(stage, flush=True)
    time.sleep(60)
"""


def hidden(folder):
    return sorted(p.name for p in folder.iterdir() if p.name.startswith("."))


def start_holder(parent):
    env = {**os.environ, "PYTHONPATH": os.getcwd()}
    process = subprocess.Popen(
        [sys.executable, "-c", HOLD, str(parent)], stdout=subprocess.PIPE, text=True, env=env
    )
    stage = process.stdout.readline().strip()
    assert stage and os.path.isdir(stage)
    return process, stage


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT])
def test_signal_removes_the_staging_folder(tmp_path, sig):
    process, stage = start_holder(tmp_path)
    assert hidden(tmp_path) == [os.path.basename(stage)]
    process.send_signal(sig)
    assert process.wait(timeout=30) != 0
    assert hidden(tmp_path) == []


def test_kill_9_leftover_is_removed_at_the_next_start(tmp_path):
    process, stage = start_holder(tmp_path)
    live, live_stage = start_holder(tmp_path)  # another run in the same folder, still alive
    process.kill()
    process.wait(timeout=30)
    assert os.path.isdir(stage)  # SIGKILL cannot be caught
    (tmp_path / ".en.old").mkdir()  # not a staging folder: left to publish()
    with staging(tmp_path, "en") as mine:
        assert not os.path.exists(stage)  # the dead process's folder is gone
        assert len(hidden(tmp_path)) == 3  # the live one, ours, .en.old
        (mine / "pos").mkdir()
        publish(mine, tmp_path / "en")
    assert (tmp_path / "en" / "pos").is_dir()
    assert hidden(tmp_path) == [os.path.basename(live_stage)]  # publish cleared .en.old
    live.kill()
    live.wait(timeout=30)
    assert remove_stale(tmp_path) and hidden(tmp_path) == []


def test_an_error_removes_the_staging_folder_and_publish_replaces(tmp_path):
    with pytest.raises(RuntimeError), staging(tmp_path, "mr") as stage:
        (stage / "x").write_text("half")
        raise RuntimeError("boom")
    assert list(tmp_path.iterdir()) == []
    (tmp_path / "mr").mkdir()
    (tmp_path / "mr" / "old.txt").write_text("old")
    with staging(tmp_path, "mr") as stage:
        (stage / "new.txt").write_text("new")
        publish(stage, tmp_path / "mr")
    assert [p.name for p in tmp_path.iterdir()] == ["mr"]
    assert [p.name for p in (tmp_path / "mr").iterdir()] == ["new.txt"]
    assert signal.getsignal(signal.SIGTERM) == signal.SIG_DFL  # handler restored
