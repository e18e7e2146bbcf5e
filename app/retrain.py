"""Retraining from the annotation tab: the settled labels train PO(M), the app switches to it.

The app runs ``python -m heuristics retrain`` (docs/app.md, "From the first label to a
retrained model") in a child process of its own session, with the labels read from the
app's database as they are when it starts; the page shows its epochs while it trains. The
child writes its run in a staging folder renamed into place when done, so a server killed
meanwhile loses no label (every label is committed before it is acknowledged) and leaves
no half run behind: the child goes on, and its finished run is there for the next start.

Only logged-in annotators that ``--can-retrain`` names may start a retrain or switch the
app to its run; everyone else is told why and given the command to run instead.
"""

from __future__ import annotations

import json
import os
import re
import shlex
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path

from rudder.evaluation.agreement import settle
from rudder.paths import cache_dir

from .annotations_db import AnnotationStore
from .escaping import markdown_text

RECORD = "manual_labels.json"  # written by heuristics retrain into the run it trains
EPOCH = re.compile(r"^epoch (\d+)/(\d+)", re.MULTILINE)


@dataclass
class RetrainSettings:
    """How the app retrains: the dataset as ``rudder.train`` names it (``sample``, a folder,
    a Hub id), the runs folder, the run the app serves (its config is the base; a callable,
    since a first model may still be training), who may retrain, whose labels settle a
    pair, the epochs (None: the base run's) and the dataset's name in the database (the
    app fills it in)."""

    dataset: str
    runs_dir: Path
    base_run: str | Path | Callable[[], str | Path | None] | None = None
    permitted: frozenset = frozenset()
    adjudicators: tuple = ()
    epochs: int | None = None
    logins: bool = False
    name: str = ""

    def base(self) -> Path | None:
        run = self.base_run() if callable(self.base_run) else self.base_run
        return None if run is None else Path(run)


def heuristics_module() -> str:
    """``heuristics`` from a checkout, ``rudder.heuristics`` from an installed wheel."""
    parent = (__package__ or "app").rpartition(".")[0]
    return f"{parent}.heuristics" if parent else "heuristics"


def read_record(run_dir) -> dict | None:
    """The ``manual_labels.json`` of a retrained run (None without one)."""
    path = Path(run_dir) / RECORD
    if not path.is_file():
        return None
    return json.loads(path.read_text(encoding="utf-8"))


class Retrainer:
    """One retrain at a time for the app: start it, follow it, switch the app to its run.

    ``switch(run_dir) -> str`` loads a run into the app (search and queues) and returns its
    description.
    """

    def __init__(self, settings: RetrainSettings, store: AnnotationStore, switch):
        self.settings, self.store, self.switch_to = settings, store, switch
        self._lock = threading.Lock()
        self._process: subprocess.Popen | None = None
        self._log: Path | None = None
        self._console = ""
        self._out: Path | None = None
        self._started = 0.0
        self._finished: Path | None = None  # a run ready to switch to
        self._error = ""
        self.serving: Path | None = None  # the retrained run the app switched to

    # ------------------------------------------------------------ rules
    def refusal(self, user: str | None) -> str | None:
        """Why ``user`` may not retrain or switch runs (None when they may)."""
        s = self.settings
        command = self.command_line()
        if not s.logins:
            return ("Retraining from the page needs logins: start the app with --auth (or "
                    f"--auth-file) and --can-retrain USER. From a shell: `{command}`")
        if not user:
            return "Log in to retrain."
        if user.casefold() not in s.permitted:
            return (f"{user} may not retrain: the app's --can-retrain names "
                    f"{', '.join(sorted(s.permitted)) or 'nobody'}. From a shell: `{command}`")
        return None

    def settled_counts(self) -> tuple[int, int, int]:
        """(settled pairs, unsettled pairs, label rows) of the dataset now."""
        records = self.store.current(self.settings.name)
        settled, unsettled = settle(records, self.settings.adjudicators)
        return len(settled), len(unsettled), len(records)

    def arguments(self, out: Path) -> list[str]:
        s = self.settings
        args = ["retrain", "--dataset", s.dataset, "--from-labels", str(self.store.path.resolve()),
                "--db-dataset", s.name, "--out", str(out)]
        base = s.base()
        if base is not None:
            args += ["--base-run", str(base.resolve())]
        for name in s.adjudicators:
            args += ["--adjudicator", name]
        if s.epochs is not None:
            args += ["--epochs", str(s.epochs)]
        return args

    def command_line(self) -> str:
        """The shell command of a retrain (what the page runs), for those who may not."""
        out = self.settings.runs_dir / "<time>-retrained-po"
        return shlex.join(["python", "-m", heuristics_module(), *self.arguments(out)])

    # ------------------------------------------------------------- runs
    def start(self, user: str | None) -> str:
        """Start a retrain for ``user``; returns what the page says."""
        refused = self.refusal(user)
        if refused:
            return refused
        with self._lock:
            if self.running:
                return "A retrain is already running; wait for it to finish."
            settled, unsettled, rows = self.settled_counts()
            if not settled:
                why = (f"{rows} labels, {unsettled} pair(s) whose annotators disagree with no "
                       "majority: a third annotator or an adjudicator settles them" if rows
                       else "no labels yet")
                return f"Nothing to retrain on: no settled labels in {self.settings.name} ({why})."
            stamp = datetime.now().strftime("%Y%m%d-%H%M%S")
            out = (self.settings.runs_dir / f"{stamp}-retrained-po").resolve()
            # the child's console (its epochs and error line), removed once it has ended
            self._log = cache_dir("retrain-logs", f"{out.name}.log")
            self._log.parent.mkdir(parents=True, exist_ok=True)
            self._console = ""
            environment = {**os.environ,
                           "OMP_NUM_THREADS": os.environ.get("OMP_NUM_THREADS", "1")}
            if not (__package__ or "app").startswith("rudder."):  # a checkout: its packages
                root = str(Path(__file__).resolve().parents[1])
                environment["PYTHONPATH"] = os.pathsep.join(
                    [root, *filter(None, [environment.get("PYTHONPATH")])])
            with open(self._log, "wb") as log:
                self._process = subprocess.Popen(
                    [sys.executable, "-m", heuristics_module(), *self.arguments(out)],
                    stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                    env=environment, start_new_session=True)
            self._out, self._started, self._finished, self._error = out, time.monotonic(), None, ""
        return (f"Retraining PO(M) on {settled} settled labels ({unsettled} unsettled pair(s) "
                f"left out) into {out.name} ...")

    @property
    def running(self) -> bool:
        return self._process is not None and self._process.poll() is None

    def status(self) -> str:
        """What the page says about retraining now (Markdown)."""
        with self._lock:
            process = self._process
            if process is None:
                settled, unsettled, rows = self.settled_counts()
                serving = ""
                if self.serving is not None:
                    serving = f" The app serves the retrained run {self.serving.name}."
                return (f"{settled} settled labels in {markdown_text(self.settings.name)} "
                        f"({unsettled} pair(s) unsettled, {rows} labels).{serving}")
            log = self._read_console(process)
            seconds = time.monotonic() - self._started
            code = process.poll()
            if code is None:
                epochs = EPOCH.findall(log)
                step = (f"epoch {epochs[-1][0]} of {epochs[-1][1]} done" if epochs
                        else "reading the labels and the dataset")
                return f"Retraining ({step}; {seconds:.0f} s so far) ..."
            if code == 0 and self._out is not None and (self._out / RECORD).is_file():
                self._finished = self._out
                record = read_record(self._out) or {}
                t2v = (record.get("test") or {}).get("t2v") or {}
                r10 = t2v.get("R10")
                score = f"; test text→video R@10 {r10:.1f}" if isinstance(r10, float) else ""
                return (f"Retrained run {markdown_text(self._out.name)} is ready: "
                        f"{record.get('labels', '?')} manual labels, labelled "
                        f"{markdown_text(str(record.get('first_label', '?'))[:16])} to "
                        f"{markdown_text(str(record.get('last_label', '?'))[:16])}{score}. "
                        "Switch the app to it below.")
            errors = [line for line in log.splitlines() if line.startswith("error:")]
            self._error = errors[-1] if errors else f"exit status {code}"
            return f"The retrain failed: {markdown_text(self._error)}"

    def _read_console(self, process) -> str:
        """The child's console so far; once it has ended, kept in memory and its file removed."""
        if self._log is None:
            return self._console
        ended = process.poll() is not None
        self._console = self._log.read_text(encoding="utf-8", errors="replace")
        if ended:
            self._log.unlink(missing_ok=True)
            self._log = None
        return self._console

    @property
    def finished(self) -> Path | None:
        """The finished run the app can switch to (None when there is none)."""
        self.status()
        return None if self._finished == self.serving else self._finished

    def switch(self, user: str | None) -> str:
        """Switch search and the model queue to the finished run, for ``user``."""
        refused = self.refusal(user)
        if refused:
            return refused
        run = self.finished
        if run is None:
            return "No finished retrain to switch to."
        description = self.switch_to(run)
        self.serving = run
        return f"The app now searches with {markdown_text(description)}."

    def stop(self) -> None:
        """Stop a running retrain (the server shuts down; tests)."""
        process = self._process
        if process is not None and process.poll() is None:  # running
            process.terminate()
            process.wait(timeout=30)
        if process is not None:
            self._read_console(process)
