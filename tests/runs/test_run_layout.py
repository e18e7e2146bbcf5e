"""rudder.runs.layout owns the files of a run: no other source names them, and its predictions,
history and config readers read what the writers (and earlier rudder versions) wrote."""

import ast
import json
import re
from pathlib import Path

import numpy as np
import pytest

from rudder.config import ConfigError, TrainConfig
from rudder.errors import RunError
from rudder.evaluation.predictions import write_predictions
from rudder.runs import layout as run_layout

ROOT = Path(__file__).resolve().parents[2]
SOURCES = ("rudder", "heuristics", "app", "datasets_scripts", "experiments", "benchmarks")
OWNER = ROOT / "rudder" / "runs" / "layout.py"
# A string that names a run file as a path (alone, or beside a slash), not prose about it.
RUN_FILE = re.compile(
    r"(^|/)(config\.yaml|env\.json|train\.log|metrics\.jsonl?|checkpoints|predictions(\.npz)?"
    r"|evaluations|last\.pt|best\.pt)($|/)"
)


def run_file_literals(path: Path) -> list[str]:
    """``file:line: 'literal'`` for each string constant (f-string parts included, docstrings
    left out) that names a run file."""
    tree = ast.parse(path.read_text(encoding="utf-8"), str(path))
    docstrings = set()
    for node in ast.walk(tree):
        if (
            isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef))
            and node.body
        ):
            first = node.body[0]
            if isinstance(first, ast.Expr) and isinstance(first.value, ast.Constant):
                docstrings.add(id(first.value))
    shown = path.relative_to(ROOT) if path.is_relative_to(ROOT) else path
    return [
        f"{shown}:{node.lineno}: {node.value!r}"
        for node in ast.walk(tree)
        if isinstance(node, ast.Constant)
        and isinstance(node.value, str)
        and id(node) not in docstrings
        and RUN_FILE.search(node.value)
    ]


# Literals that name another tool's file, not a run's, and why.
NOT_RUN_FILES = {
    "datasets_scripts/video_experts.py: 'checkpoints'": "torch.hub's cache folder "
    "($TORCH_HOME/hub/checkpoints), where published weights are downloaded",
}


def test_only_run_layout_names_the_files_of_a_run():
    found = [
        hit
        for package in SOURCES
        for path in sorted((ROOT / package).rglob("*.py"))
        if path != OWNER
        for hit in run_file_literals(path)
        if re.sub(r":\d+:", ":", hit) not in NOT_RUN_FILES
    ]
    assert found == []


def test_the_check_sees_paths_and_not_prose(tmp_path):
    module = tmp_path / "m.py"
    module.write_text(
        '"""Reads metrics.json of a run."""\n'
        "def f(run, split):\n"
        '    """Its checkpoints/best.pt."""\n'
        '    print("see metrics.json for the test metrics")\n'
        '    a = run / "metrics.json"\n'
        '    b = f"{run}/checkpoints/last.pt"\n'
        '    return a, b, run.glob("**/config.yaml"), run / "predictions" / f"{split}.npz"\n'
    )
    found = run_file_literals(module)
    assert [hit.split(": ", 1)[1] for hit in found] == [
        "'metrics.json'",
        "'/checkpoints/last.pt'",
        "'**/config.yaml'",
        "'predictions'",
    ]
    assert RUN_FILE.search(
        run_layout.metrics_file("x").as_posix()
    )  # the pattern matches the real names


def test_paths_of_a_run():
    run = Path("runs/a")
    assert run_layout.config_file(run) == run / "config.yaml"
    assert run_layout.history_file(run) == run / "metrics.jsonl"
    assert run_layout.metrics_file(run) == run / "metrics.json"
    assert run_layout.checkpoint_file(run, "last") == run / "checkpoints" / "last.pt"
    assert run_layout.predictions_file(run, "validation") == run / "predictions" / "validation.npz"
    assert (
        run_layout.evaluation_dir(run, "test", "fusion-avg")
        == run / "evaluations" / "test-fusion-avg"
    )
    assert run_layout.run_of_checkpoint(run_layout.checkpoint_file(run)) == run


def test_find_checkpoint_and_checkpoints_under(tmp_path):
    run = tmp_path / "group" / "seed-0"
    with pytest.raises(RunError, match=r"holds no checkpoint \(expected .*checkpoints/best.pt"):
        run_layout.find_checkpoint(run)
    run_layout.make_run_dirs(run)
    run_layout.checkpoint_file(run, "last").write_bytes(b"x")
    assert run_layout.find_checkpoint(run) == run_layout.checkpoint_file(run, "last")
    run_layout.checkpoint_file(run, "best").write_bytes(b"x")
    assert run_layout.find_checkpoint(run) == run_layout.checkpoint_file(run, "best")
    assert run_layout.checkpoints_under(tmp_path) == [run_layout.checkpoint_file(run, "best")]
    assert run_layout.checkpoints_under(run, "last") == [run_layout.checkpoint_file(run, "last")]
    assert run_layout.is_single_run(run) and not run_layout.is_single_run(run.parent)


# Two videos, two caption slots each (v1's second empty), as docs/architecture.md lays them out.
SIMS = np.array([[0.9, 0.1], [0.2, 0.8], [0.3, 0.6], [0.0, 0.0]], dtype=np.float32)
MASKS = np.array([[True, True], [True, False]])
CAPTION_IDS = np.array([["v0-mr", "v0-en"], ["v1-mr", ""]])
VIDEO_IDS = np.array(["v0", "v1"])


def test_predictions_round_trip_with_their_ranks(tmp_path):
    path = write_predictions(tmp_path / "p.npz", SIMS, MASKS, CAPTION_IDS, VIDEO_IDS)
    saved = run_layout.read_predictions(path)
    np.testing.assert_array_equal(saved.sims, SIMS)
    np.testing.assert_array_equal(saved.caption_ids, CAPTION_IDS)
    # t2v: each caption's rank of its own video (v0c0 0, v0c1 1, v1c0 0; the empty slot NaN);
    # v2t: each video's best-ranked own caption among the three valid ones (v0: v0c0 first -> 0;
    # v1: column [0.1, 0.8, 0.6] ranks v1c0 second -> 1).
    np.testing.assert_array_equal(saved.ranks_t2v, [0, 1, 0, np.nan])
    np.testing.assert_array_equal(saved.ranks_v2t, [0, 1])
    assert saved.sims_v2t is None
    v2t = np.array([[0.1, 0.5], [0.2, 0.9], [0.3, 0.1], [-np.inf, -np.inf]], dtype=np.float32)
    both = run_layout.read_predictions(
        write_predictions(tmp_path / "q.npz", SIMS, MASKS, CAPTION_IDS, VIDEO_IDS, v2t)
    )
    np.testing.assert_array_equal(both.sims_v2t, v2t)
    # v2t from its own scores: v0's column [0.1, 0.2, 0.3] ranks v0c1 second -> 1; v1's column
    # [0.5, 0.9, 0.1] ranks v1c0 third -> 2. t2v still from sims.
    np.testing.assert_array_equal(both.ranks_v2t, [1, 2])
    np.testing.assert_array_equal(both.ranks_t2v, saved.ranks_t2v)


def test_predictions_of_earlier_versions_are_read(tmp_path):
    """The trainer's and the experiments fusion's files before run_layout: same arrays, the
    fusion's with sims_v2t."""
    ranks = {"ranks_t2v": np.array([0, 1, 0, np.nan]), "ranks_v2t": np.array([0.0, 1.0])}
    np.savez_compressed(
        tmp_path / "trainer.npz",
        sims=SIMS,
        query_masks=MASKS,
        **ranks,
        video_ids=VIDEO_IDS,
        caption_ids=CAPTION_IDS.astype(str),
    )
    np.savez_compressed(
        tmp_path / "fusion.npz",
        sims=SIMS,
        sims_v2t=SIMS,
        query_masks=MASKS,
        **ranks,
        caption_ids=CAPTION_IDS,
        video_ids=VIDEO_IDS,
    )
    trainer = run_layout.read_predictions(tmp_path / "trainer.npz")
    assert trainer.sims_v2t is None and list(trainer.video_ids) == ["v0", "v1"]
    np.testing.assert_array_equal(
        run_layout.read_predictions(tmp_path / "fusion.npz").sims_v2t, SIMS
    )


def test_bad_predictions_are_named(tmp_path):
    np.savez_compressed(
        tmp_path / "old.npz", sims=SIMS, query_masks=MASKS, ranks_t2v=SIMS[:, 0], ranks_v2t=SIMS[0]
    )
    with pytest.raises(
        RunError, match=r"old.npz: predictions without \['caption_ids', 'video_ids'\]"
    ):
        run_layout.read_predictions(tmp_path / "old.npz")
    (tmp_path / "torn.npz").write_bytes(b"PK half a file")
    with pytest.raises(RunError, match="torn.npz: cannot read predictions"):
        run_layout.read_predictions(tmp_path / "torn.npz")
    with pytest.raises(RunError, match="missing.npz: cannot read predictions"):
        run_layout.read_predictions(tmp_path / "missing.npz")


def test_history_append_read_truncate(tmp_path):
    assert run_layout.read_history(tmp_path) == []
    for epoch in (1, 2, 3):
        run_layout.append_history(tmp_path, {"epoch": epoch, "split": "validation"})
    assert [r["epoch"] for r in run_layout.read_history(tmp_path)] == [1, 2, 3]
    with open(run_layout.history_file(tmp_path), "a", encoding="utf-8") as handle:
        handle.write('{"epoch": 4, "spl')  # a line still being written
    assert [r["epoch"] for r in run_layout.read_history(tmp_path)] == [1, 2, 3]
    run_layout.truncate_history(tmp_path, 2)
    assert run_layout.history_file(tmp_path).read_text() == (
        '{"epoch": 1, "split": "validation"}\n{"epoch": 2, "split": "validation"}\n'
    )
    path = run_layout.history_file(tmp_path)
    path.write_text("garbage\n" + path.read_text())
    with pytest.raises(RunError, match=rf"{path}:1: not an evaluation record \('garbage'\)"):
        run_layout.read_history(tmp_path)


def test_config_metrics_round_trip_and_errors(tmp_path):
    run_layout.write_config(tmp_path, TrainConfig(epochs=3))
    assert run_layout.read_config(tmp_path)["epochs"] == 3
    run_layout.write_metrics(tmp_path, {"test": {"t2v": {"R1": 50.0}}})
    assert json.loads(run_layout.metrics_file(tmp_path).read_text()) == run_layout.read_metrics(
        tmp_path
    )
    with pytest.raises(ConfigError, match=r"config file .*missing.*config.yaml does not exist"):
        run_layout.read_config(tmp_path / "missing")
    run_layout.metrics_file(tmp_path).write_text("{")
    with pytest.raises(RunError, match=r"metrics.json: cannot read"):
        run_layout.read_metrics(tmp_path)
