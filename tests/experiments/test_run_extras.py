"""A suite whose rows need a missing extra stops before its first row trains."""

import sys

from experiments import run, tune

from .conftest import write_suite


def test_a_missing_extra_stops_the_suite_before_any_row(tiny_dataset, tmp_path, monkeypatch,
                                                        capsys):
    monkeypatch.setitem(sys.modules, "tensorboard", None)
    suites = tmp_path / "suites"
    rows = [("mm", "MM", "mm", {}), ("tb", "TB", "mm", {"tensorboard": True})]
    write_suite(suites, "needs", rows)
    argv = ["needs", "--seeds", "1", "--dataset", str(tiny_dataset), "--suites-dir", str(suites),
            "--runs-dir", str(tmp_path / "runs"), "--output", str(tmp_path / "results")]
    assert run.main(argv) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("error: tensorboard (for tensorboard=true) is not installed")
    assert 'pip install -e ".[tensorboard]"' in err and "\n" not in err
    assert not (tmp_path / "runs").exists()  # not even the first row (MM) was trained
    assert run.main([*argv, "--dry-run"]) == 0  # planning needs no extra
    capsys.readouterr()

    write_suite(suites, "tuned", [("tb", "TB", "mm", {"tensorboard": True})],
                tune={"trials": 1, "epochs": 1, "grids": {"mm": {"optim.lr": [0.001]}}})
    tuned = ["tuned", "--dataset", str(tiny_dataset), "--suites-dir", str(suites),
             "--runs-dir", str(tmp_path / "tune-runs"), "--output", str(tmp_path / "results")]
    assert tune.main(tuned) == 2
    assert 'pip install -e ".[tensorboard]"' in capsys.readouterr().err
    assert not (tmp_path / "tune-runs").exists()
