"""One training run of a suite (a row with one seed): its status, its training (resumed
where it stopped) and the wall-clock and CPU seconds it took (``timing.json``).

:mod:`experiments.run` plans and trains the jobs of a suite, :mod:`experiments.tune` trains
its trials as jobs, and :mod:`experiments.suite_report` reads their timing.
"""

from __future__ import annotations

import json
import time
from dataclasses import dataclass, field
from pathlib import Path

from rudder.atomic import atomic_write_text
from rudder.config import TrainConfig
from rudder.runs.layout import (
    checkpoint_file,
    config_file,
    metrics_file,
    predictions_file,
    read_config,
)

from .suites import Row, config_changes

TIMING_FILE = "timing.json"


@dataclass
class Job:
    """One training run: a row of the suite with one seed."""

    row: Row
    seed: int
    config: TrainConfig
    run_dir: Path
    settings: dict = field(default_factory=dict)  # chosen by experiments.tune, applied to config

    @property
    def status(self) -> str:
        """``done`` (test metrics written), ``resume`` (a last.pt exists), ``new``, or ``stale``
        (the run's saved config.yaml differs from the row's config: see :meth:`changes`)."""
        if self.changes():
            return "stale"
        tested = predictions_file(self.run_dir, "test").is_file()
        if tested and metrics_file(self.run_dir).is_file():
            return "done"
        if checkpoint_file(self.run_dir, "last").is_file():
            return "resume"
        return "new"

    def changes(self) -> list[str]:
        if not config_file(self.run_dir).is_file():
            return []
        return config_changes(read_config(self.run_dir), self.config)


def train_job(job: Job, fit=None) -> float:
    """Train (or resume) one run with ``fit`` (default :func:`rudder.train.run`: train, then
    test); adds its wall-clock and CPU seconds (all threads of this process) to
    ``timing.json``."""
    from rudder.train import run

    status = job.status
    if status == "done":
        return 0.0
    start, cpu_start = time.perf_counter(), time.process_time()
    (fit or run)(job.config, job.run_dir, resume=status == "resume", overwrite=status == "new")
    seconds, cpu = time.perf_counter() - start, time.process_time() - cpu_start
    timing_path = job.run_dir / TIMING_FILE
    previous = json.loads(timing_path.read_text()) if timing_path.is_file() else {}
    timing = {
        "seconds": previous.get("seconds", 0.0) + seconds,
        "cpu_seconds": previous.get("cpu_seconds", 0.0) + cpu,
        "sessions": previous.get("sessions", 0) + 1,
    }
    atomic_write_text(timing_path, json.dumps(timing))
    return seconds


def run_timing(job: Job) -> dict:
    """Recorded ``seconds`` and ``cpu_seconds`` of a run (empty when trained outside the runner)."""
    path = job.run_dir / TIMING_FILE
    return json.loads(path.read_text()) if path.is_file() else {}
