"""Every command line prints its help and exits 0 (docs/architecture.md: CLI entry points)."""

import subprocess
import sys

import pytest

COMMANDS = [
    ["rudder.train"],
    ["rudder.evaluate"],
    ["rudder.publish"],
    ["rudder.data.sample"],
    ["rudder.text.embedding_cache", "prune"],
    ["heuristics"],
    ["heuristics", "label"],
    ["heuristics", "train-tagger"],
    ["datasets_scripts"],
    ["datasets_scripts", "build"],
    ["datasets_scripts", "translate"],
    ["datasets_scripts", "publish"],
    ["app"],
    ["experiments.run"],
    ["experiments.tune"],
]


@pytest.mark.parametrize("command", COMMANDS, ids=" ".join)
def test_help(command):
    done = subprocess.run(
        [sys.executable, "-m", *command, "--help"], capture_output=True, text=True, timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    assert "usage:" in done.stdout


def _bad_yaml(tmp_path):
    path = tmp_path / "bad.yaml"
    path.write_text("epochs: [1,\n  loss: x\n")
    return str(path)


# Each command given input that raises a rudder.errors.RudderError (a config, run or dataset
# that cannot be used); argv builders get a temporary folder that holds no dataset or run.
ERROR_CASES = {
    "rudder.train bad YAML": ("rudder.train", lambda tmp: ["--config", _bad_yaml(tmp),
                                                           "--output-dir", str(tmp / "r")]),
    "rudder.train bad value": ("rudder.train", lambda tmp: ["--set", "optim.lr=fast",
                                                            "--output-dir", str(tmp / "r")]),
    "rudder.evaluate": ("rudder.evaluation.evaluate", lambda tmp: [str(tmp)]),
    "rudder.evaluate hf://": ("rudder.evaluation.evaluate", lambda tmp: ["hf://u/n@@"]),
    "rudder.publish": ("rudder.hub.publish",
                       lambda tmp: [str(tmp), "--repo-id", "u/n", "--dry-run"]),
    "app": ("app.__main__", lambda tmp: ["--checkpoint", str(tmp)]),
    "heuristics": ("heuristics.__main__",
                   lambda tmp: ["label", "--dataset", str(tmp), "--tagger", "lexicon"]),
    "datasets_scripts": ("datasets_scripts.__main__",
                         lambda tmp: ["publish", str(tmp), "--repo-id", "u/n", "--dry-run"]),
    "experiments.run": ("experiments.run", lambda tmp: ["relevance", "--epochs", "0", "--dry-run"]),
}


@pytest.mark.parametrize("case", list(ERROR_CASES))
def test_errors_exit_2_with_one_line(case, tmp_path, capsys):
    import importlib

    module, argv = ERROR_CASES[case]
    try:
        code = importlib.import_module(module).main(argv(tmp_path))
    except SystemExit as exit_info:
        code = exit_info.code
    err = capsys.readouterr().err.strip().splitlines()
    assert code == 2, err
    assert len(err) == 1 and err[0].startswith("error: "), err
    assert not (tmp_path / "r").exists()
