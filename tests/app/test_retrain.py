"""Retraining from the app: who may, what it says, and that a killed server loses no label
and leaves no half run (a real server process killed with SIGKILL during a retrain)."""

import json
import os
import signal
import socket
import sqlite3
import subprocess
import sys
import time
from argparse import Namespace
from pathlib import Path

import pytest

from app.__main__ import newest_run_for, retrain_settings
from app.annotations_db import AnnotationStore
from app.auth import Logins
from app.retrain import Retrainer, RetrainSettings
from rudder.errors import RunError
from rudder.runs.layout import checkpoints_under

ROOT = Path(__file__).resolve().parents[2]
TINY = "tiny"  # the rudder.json name of tests/factories.concept_dataset (conftest: concept)


def settings(tmp_path, **changes):
    values = {"dataset": "x", "runs_dir": tmp_path / "runs", "permitted": frozenset({"asha"}),
              "logins": True, "name": TINY}
    return RetrainSettings(**{**values, **changes})


def test_permissions_need_logins_that_exist():
    logins = Logins()
    logins.add_plain("Asha:secret")
    args = Namespace(can_retrain=["asha"], adjudicator=["boss"], runs="runs",
                     retrain_epochs=None)
    with pytest.raises(RunError, match="--adjudicator boss: no such login \\(logins: Asha\\)"):
        retrain_settings(args, logins, "sample", None)
    with pytest.raises(RunError, match="--can-retrain asha: permissions need logins"):
        retrain_settings(args, None, "sample", None)
    args.adjudicator = []
    made = retrain_settings(args, logins, "sample", Path("runs/r"))
    assert made.permitted == {"asha"} and made.logins and made.base() == Path("runs/r")


def test_who_may_retrain_and_what_the_others_are_told(tmp_path):
    store = AnnotationStore(tmp_path / "labels.sqlite")
    retrainer = Retrainer(settings(tmp_path), store, lambda run: "new")
    assert "needs logins" in Retrainer(settings(tmp_path, logins=False), store,
                                       None).start("asha")
    assert retrainer.start(None) == "Log in to retrain."
    refused = retrainer.start("ravi")
    assert refused.startswith("ravi may not retrain: the app's --can-retrain names asha")
    assert "python -m heuristics retrain --dataset x --from-labels" in refused
    assert retrainer.start("Asha") == ("Nothing to retrain on: no settled labels in tiny (no "
                                       "labels yet).")
    store.add(TINY, "asha", "v000-en", "v001-en", "partial")
    store.add(TINY, "ravi", "v000-en", "v001-en", "negative")
    assert "1 pair(s) whose annotators disagree with no majority" in retrainer.start("asha")
    assert retrainer.switch("asha") == "No finished retrain to switch to."
    assert "0 settled labels in tiny (1 pair(s) unsettled, 2 labels)" in retrainer.status()
    assert not retrainer.running


def test_a_finished_retrain_reports_its_error_and_leaves_no_console_file(tmp_path,
                                                                          monkeypatch):
    from app import retrain

    monkeypatch.setenv("RUDDER_CACHE", str(tmp_path))  # the console file goes under it
    # a child that fails at once with one error line, as `heuristics retrain` does
    (tmp_path / "failing_retrain.py").write_text(
        "import sys\nprint('epoch 1/3 done')\nprint('error: the dataset is gone')\nsys.exit(2)\n")
    monkeypatch.setenv("PYTHONPATH", str(tmp_path))
    monkeypatch.setattr(retrain, "heuristics_module", lambda: "failing_retrain")
    store = AnnotationStore(tmp_path / "labels.sqlite")
    store.add(TINY, "asha", "v000-en", "v001-en", "partial")
    retrainer = Retrainer(settings(tmp_path), store, lambda run: "new")
    assert retrainer.start("asha").startswith("Retraining PO(M) on 1 settled labels")
    assert len(list(tmp_path.glob("retrain-logs/*.log"))) == 1
    deadline = time.monotonic() + 60
    while retrainer.running and time.monotonic() < deadline:
        time.sleep(0.1)
    status = retrainer.status()
    assert status == "The retrain failed: error: the dataset is gone"
    assert list(tmp_path.glob("retrain-logs/*.log")) == []  # removed once it ended
    assert retrainer.status() == status  # read from memory afterwards


def label_through_the_api(client, count, seen):
    """Label ``count`` queue pairs as the logged-in user; returns the acknowledged pairs."""
    shown = client.predict("", TINY, "any", "heuristic", api_name="/next_unlabelled")
    acknowledged = []
    for i in range(count):
        query, candidate = shown[1], shown[3]
        if not candidate:
            break
        api = ("/label_partial", "/label_negative", "/label_positive")[i % 3]
        shown = client.predict("", TINY, query, candidate, "any", "heuristic", api_name=api)
        acknowledged.append((query, candidate))
        seen.add((query, candidate))
    return acknowledged


def free_port():
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def start_server(concept, base_run, db, runs, port, log):
    command = [sys.executable, "-m", "app", "--dataset", str(concept), "--checkpoint",
               str(base_run), "--db", str(db), "--runs", str(runs), "--port", str(port),
               "--auth", "asha:secret", "--can-retrain", "asha", "--retrain-epochs", "3"]
    environment = {**os.environ, "OMP_NUM_THREADS": "1", "RUDDER_CACHE": str(runs.parent),
                   "GRADIO_ANALYTICS_ENABLED": "False", "HF_HUB_OFFLINE": "1"}
    server = subprocess.Popen(command, cwd=ROOT, env=environment, stdout=log,
                              stderr=subprocess.STDOUT)
    deadline = time.monotonic() + 180
    while time.monotonic() < deadline:
        if server.poll() is not None:
            raise AssertionError(f"the server stopped: {Path(log.name).read_text()[-2000:]}")
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=1):
                return server
        except OSError:
            time.sleep(0.5)
    server.kill()
    raise AssertionError("the server did not start within 180 s")


def retrain_children(runs: Path) -> list[int]:
    """Process ids of retrains (started by the server under test) writing into ``runs``."""
    found = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                command = (entry / "cmdline").read_bytes().split(b"\0")
            except OSError:
                continue
            if b"retrain" in command and any(str(runs).encode() in part for part in command):
                found.append(int(entry.name))
    return found


@pytest.mark.slow
def test_a_server_killed_during_a_retrain_loses_no_label(concept, base_run, tmp_path):
    from gradio_client import Client

    runs, db = tmp_path / "runs", tmp_path / "labels.sqlite"
    runs.mkdir()
    port, seen = free_port(), set()
    with open(tmp_path / "server.log", "wb") as log:
        server = start_server(concept, base_run, db, runs, port, log)
        try:
            client = Client(f"http://127.0.0.1:{port}/", verbose=False,
                            analytics_enabled=False, auth=("asha", "secret"))
            acknowledged = label_through_the_api(client, 6, seen)
            started = client.predict(api_name="/retrain")[0]
            assert started.startswith("Retraining PO(M) on 6 settled labels"), started
            acknowledged += label_through_the_api(client, 4, seen)  # while it trains
            deadline = time.monotonic() + 120
            while not list(runs.glob(".*staging*")) and time.monotonic() < deadline:
                time.sleep(0.2)  # the retrain is writing its run in the staging folder
            assert list(runs.glob(".*staging*")), Path(log.name).read_text()[-2000:]
            server.send_signal(signal.SIGKILL)
            server.wait(timeout=30)
        finally:
            if server.poll() is None:
                server.kill()
    try:
        # every acknowledged label is in the file, which is intact
        with sqlite3.connect(db) as handle:
            assert handle.execute("PRAGMA integrity_check").fetchone()[0] == "ok"
            rows = set(handle.execute(
                "SELECT caption_id_a, caption_id_b FROM labels WHERE undone = 0").fetchall())
        assert set(acknowledged) <= rows and len(acknowledged) == 10
        # the staged run is no run while it trains; the retrain goes on and finishes
        assert newest_run_for(runs, str(concept)) is None
        deadline = time.monotonic() + 300
        while not list(runs.glob("*-retrained-po")) and time.monotonic() < deadline:
            time.sleep(0.5)
        (finished,) = runs.glob("*-retrained-po")
        record = json.loads((finished / "manual_labels.json").read_text())
        # the labels as the retrain read them, a moment after it started
        assert 6 <= record["labels"] <= 10 and record["source"] == str(db.resolve())
        assert not list(runs.glob(".*")) and len(checkpoints_under(runs)) == 1
        assert newest_run_for(runs, str(concept), ["mr", "en"]) == finished
        # a retrain killed outright leaves its staging; the next one sweeps it
        child = subprocess.Popen(
            [sys.executable, "-m", "heuristics", "retrain", "--dataset", str(concept),
             "--from-labels", str(db), "--base-run", str(base_run), "--out",
             str(runs / "second"), "--epochs", "50"],
            cwd=ROOT, env={**os.environ, "OMP_NUM_THREADS": "1"},
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        deadline = time.monotonic() + 120
        while not list(runs.glob(".second.staging*/run/checkpoints/last.pt")):
            assert time.monotonic() < deadline and child.poll() is None
            time.sleep(0.2)
        child.send_signal(signal.SIGKILL)
        child.wait(timeout=30)
        assert list(runs.glob(".second.staging*")) and not (runs / "second").exists()
        assert newest_run_for(runs, str(concept), ["mr", "en"]) == finished
        from heuristics.retrain import sweep_dead_staging

        sweep_dead_staging(runs)
        assert not list(runs.glob(".*"))
    finally:
        for pid in retrain_children(runs):
            os.kill(pid, signal.SIGKILL)
