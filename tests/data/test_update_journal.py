"""Staging folders of the update journal: a dead writer's are swept, a live writer's never,
whichever host wrote them (the dataset lock decides, not a process id)."""

import os
import subprocess
import sys
import time

import pytest

from rudder.atomic import dataset_lock
from rudder.data.update_journal import complete_pending, update_files

HOLD_LOCK = """
import sys, time
sys.path.insert(0, {root!r})
from rudder.atomic import dataset_lock
with dataset_lock(sys.argv[1]):
    print("locked", flush=True)
    time.sleep(60)
"""


def _stage(root, pid):
    folder = root / f".rudder.update-{pid}-0123abcd"
    (folder / "captions").mkdir(parents=True)
    (folder / "captions" / "train.parquet").write_bytes(b"half written")
    return folder


def _dead_pid() -> int:
    done = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"],
                          capture_output=True, check=True, text=True)
    return int(done.stdout)


@pytest.fixture
def lock_held_elsewhere(tmp_path):
    """A process holding the dataset lock, as a writer on another host would."""
    from pathlib import Path

    script = tmp_path / "hold.py"
    script.write_text(HOLD_LOCK.format(root=str(Path(__file__).resolve().parents[2])))
    processes = []

    def hold(root):
        process = subprocess.Popen([sys.executable, str(script), str(root)],
                                   stdout=subprocess.PIPE, text=True)
        processes.append(process)
        assert process.stdout.readline().strip() == "locked"

    yield hold
    for process in processes:
        process.kill()
        process.wait(timeout=30)


def test_a_dead_writers_staging_is_removed_even_if_its_pid_is_alive_here(tmp_path):
    """On shared storage the writer ran on another host: its pid may be any live process here
    (pid 1 always is). With the lock free, no writer is at work, so the staging is dead."""
    stage = _stage(tmp_path, 1)
    assert complete_pending(tmp_path) is False
    assert not stage.exists()


def test_a_live_writers_staging_is_left_alone_while_it_holds_the_lock(tmp_path,
                                                                      lock_held_elsewhere):
    stage = _stage(tmp_path, _dead_pid())  # its pid means nothing on this host
    lock_held_elsewhere(tmp_path)
    started = time.monotonic()
    assert complete_pending(tmp_path) is False
    assert stage.exists() and time.monotonic() - started < 5  # a reader does not wait for it


def test_this_processs_own_staging_is_left_to_its_update(tmp_path):
    with dataset_lock(tmp_path):  # a writer opening the folder it is updating
        stage = _stage(tmp_path, os.getpid())
        assert complete_pending(tmp_path) is False
        assert stage.exists()


def test_the_next_writer_sweeps_dead_staging_and_writes(tmp_path):
    stale = _stage(tmp_path, 1)
    update_files(tmp_path, {"notes.txt": lambda path: path.write_text("new")})
    assert (tmp_path / "notes.txt").read_text() == "new"
    assert not stale.exists() and not list(tmp_path.glob(".rudder.update-*"))
