"""rudder.atomic: files replaced in one rename; staging folders removed on errors, Ctrl-C and
SIGTERM, and after kill -9 at the next start."""

import contextlib
import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from rudder.atomic import atomic_write_text, replacing, staged_folder, swap_into_place, sweep

# The holder relies on SIGINT raising KeyboardInterrupt and on receiving SIGTERM, so it says so
# rather than inheriting what its parent had: a runner that ignores SIGINT (a background job of
# a script) passes that on, and a signal mask a library left blocked in the test process is
# inherited across fork and exec.
HOLD = """
import signal, sys, time
from pathlib import Path
from rudder.atomic import staged_folder
signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGINT, signal.SIGTERM})
signal.signal(signal.SIGINT, signal.default_int_handler)
with staged_folder(Path(sys.argv[1]) / "en") as stage:
    (stage / "pos").mkdir()
    print(stage, flush=True)
    time.sleep(60)
"""


def hidden(folder):
    return sorted(p.name for p in folder.iterdir() if p.name.startswith("."))


@contextlib.contextmanager
def sigint_ignored_for_children(ignored=True):
    """Children started within inherit an ignored SIGINT (what ``cmd &`` does in a script)."""
    previous = signal.signal(signal.SIGINT, signal.SIG_IGN) if ignored else None
    try:
        yield
    finally:
        if ignored:
            signal.signal(signal.SIGINT, previous)


def start_holder(parent, sigint_ignored=False):
    env = {**os.environ, "PYTHONPATH": os.getcwd()}
    with sigint_ignored_for_children(sigint_ignored):
        process = subprocess.Popen(
            [sys.executable, "-c", HOLD, str(parent)], stdout=subprocess.PIPE, text=True, env=env
        )
    stage = process.stdout.readline().strip()
    assert stage and os.path.isdir(stage)
    return process, stage


@pytest.mark.parametrize("sigint_ignored", [False, True], ids=["sigint-default", "sigint-ignored"])
@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT])
def test_signal_removes_the_staging_folder(tmp_path, sig, sigint_ignored):
    process, stage = start_holder(tmp_path, sigint_ignored)
    assert hidden(tmp_path) == [os.path.basename(stage)]
    process.send_signal(sig)
    try:
        code = process.wait(timeout=30)
    except subprocess.TimeoutExpired:
        status = Path(f"/proc/{process.pid}/status").read_text()  # why it did not stop
        process.kill()
        pytest.fail("the holder ignored the signal:\n" + "\n".join(
            line for line in status.splitlines() if line.startswith("Sig")))
    assert code != 0
    assert hidden(tmp_path) == []


def test_the_signal_test_passes_when_the_suite_starts_with_sigint_ignored():
    """As under ``nohup pytest &`` in a script: every process below inherits SIG_IGN."""
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    with sigint_ignored_for_children():
        result = subprocess.run(
            [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider",
             "tests/test_atomic.py::test_signal_removes_the_staging_folder"],
            cwd=os.path.dirname(os.path.dirname(os.path.abspath(__file__))), env=env,
            capture_output=True, text=True, timeout=300, check=False,
        )
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    assert "4 passed" in result.stdout


def test_kill_9_leftover_is_removed_at_the_next_start(tmp_path):
    process, stage = start_holder(tmp_path)
    live, live_stage = start_holder(tmp_path)  # another run in the same folder, still alive
    process.kill()
    process.wait(timeout=30)
    assert os.path.isdir(stage)  # SIGKILL cannot be caught
    with staged_folder(tmp_path / "en") as mine:
        assert not os.path.exists(stage)  # the dead process's folder is gone
        assert len(hidden(tmp_path)) == 2  # the live one, ours
        (mine / "pos").mkdir()
        swap_into_place(mine, tmp_path / "en")
    assert (tmp_path / "en" / "pos").is_dir()
    assert hidden(tmp_path) == [os.path.basename(live_stage)]
    live.kill()
    live.wait(timeout=30)
    assert sweep(tmp_path / "en") and hidden(tmp_path) == []


def test_an_error_removes_the_staging_folder_and_a_swap_replaces(tmp_path):
    before = signal.getsignal(signal.SIGTERM)  # another library (Ray, a server) may own it
    with pytest.raises(RuntimeError), staged_folder(tmp_path / "mr") as stage:
        (stage / "x").write_text("half")
        raise RuntimeError("boom")
    assert list(tmp_path.iterdir()) == []
    (tmp_path / "mr").mkdir()
    (tmp_path / "mr" / "old.txt").write_text("old")
    with staged_folder(tmp_path / "mr") as stage:
        (stage / "new.txt").write_text("new")
        swap_into_place(stage, tmp_path / "mr")
    assert [p.name for p in tmp_path.iterdir()] == ["mr"]
    assert [p.name for p in (tmp_path / "mr").iterdir()] == ["new.txt"]
    assert signal.getsignal(signal.SIGTERM) == before  # handler restored


def test_a_failed_write_keeps_the_old_file_and_leaves_no_temporary(tmp_path):
    path = atomic_write_text(tmp_path / "sub" / "a.txt", "old")
    with pytest.raises(OSError, match="disk full"), replacing(path) as tmp:
        tmp.write_text("half")
        raise OSError("disk full")
    assert path.read_text() == "old" and os.listdir(path.parent) == ["a.txt"]
    with replacing(path) as tmp:
        tmp.write_text("new")
        assert path.read_text() == "old"  # readers see the old file until the rename
    assert path.read_text() == "new" and os.listdir(path.parent) == ["a.txt"]


def test_a_temporary_left_by_a_killed_writer_is_swept(tmp_path):
    code = (
        "import os, sys\nfrom rudder.atomic import replacing\n"
        "with replacing(sys.argv[1]) as tmp:\n    tmp.write_text('half')\n    os._exit(9)\n"
    )
    env = {**os.environ, "PYTHONPATH": os.getcwd()}
    done = subprocess.run([sys.executable, "-c", code, str(tmp_path / "a.txt")], env=env,
                          check=False)
    assert done.returncode == 9
    assert len(hidden(tmp_path)) == 1 and not (tmp_path / "a.txt").exists()
    assert sweep(tmp_path / "a.txt") and hidden(tmp_path) == []
    subprocess.run([sys.executable, "-c", code, str(tmp_path / "a.txt")], env=env, check=False)
    atomic_write_text(tmp_path / "a.txt", "whole")  # the next write sweeps the leftover itself
    assert hidden(tmp_path) == [] and (tmp_path / "a.txt").read_text() == "whole"


def test_dataset_lock_waits_then_names_the_folder(tmp_path):
    import threading

    from rudder.atomic import LockTimeout, dataset_lock

    def other_thread():
        try:
            with dataset_lock(tmp_path, timeout=0.2):
                outcome.append("locked")
        except LockTimeout as error:
            outcome.append(error)

    outcome = []
    with dataset_lock(tmp_path):
        start = time.monotonic()
        with dataset_lock(tmp_path, timeout=0):  # re-entrant in the thread that holds it
            pass
        thread = threading.Thread(target=other_thread)
        thread.start()
        thread.join()
        assert isinstance(outcome[0], LockTimeout), outcome
        assert re.search(f"{tmp_path}: another process .* over 0.2 s", str(outcome[0]))
        assert time.monotonic() - start >= 0.2
    with dataset_lock(tmp_path, timeout=0):  # released at the end of the block
        pass
    missing = r"missing/.rudder.lock: cannot open the dataset's lock"
    with pytest.raises(LockTimeout, match=missing), dataset_lock(tmp_path / "missing"):
        pass
