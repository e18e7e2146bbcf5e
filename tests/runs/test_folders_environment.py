"""What a run's env.json records about the machine."""

import json
import platform
from pathlib import Path

from rudder.runs.folders import cpu_model, environment_record


def test_env_json_names_the_cpu_model_from_cpuinfo(monkeypatch, tmp_path):
    cpuinfo = tmp_path / "cpuinfo"
    cpuinfo.write_text("processor\t: 0\nvendor_id\t: AuthenticAMD\n"
                       "model name\t: AMD EPYC 9654 96-Core Processor\n", encoding="utf-8")
    real = Path.read_text
    monkeypatch.setattr(Path, "read_text", lambda self, *a, **k: real(
        cpuinfo if str(self) == "/proc/cpuinfo" else self, *a, **k))
    assert cpu_model() == "AMD EPYC 9654 96-Core Processor"
    record = environment_record("fingerprint")
    assert record["cpu"] == "AMD EPYC 9654 96-Core Processor"
    assert json.loads(json.dumps(record)) == record  # what env.json holds


def test_without_cpuinfo_the_cpu_is_the_platforms_name(monkeypatch):
    def unreadable(self, *args, **kwargs):
        raise OSError("no /proc here")

    monkeypatch.setattr(Path, "read_text", unreadable)
    assert cpu_model() == (platform.processor() or platform.machine())
