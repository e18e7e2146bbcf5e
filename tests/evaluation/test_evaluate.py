import json

import numpy as np
import pytest

from rudder.errors import RunError
from rudder.evaluation import evaluate
from rudder.evaluation.loading import load_run
from rudder.runs.layout import read_predictions


@pytest.fixture(scope="module")
def two_runs(tmp_path_factory, tiny_dataset):
    from rudder import train

    root = tmp_path_factory.mktemp("runs")
    args = ["--dataset", str(tiny_dataset), "--epochs", "1", "--set", "data.batch_size=8",
            "--set", "model.shared_dim=16", "--set", "model.word_dim=8",
            "--set", "data.caption_langs=[mr, en]", "--set", "data.audio_langs=[mr]"]
    results = [train.main([*args, "--seed", str(seed), "--output-dir", str(root / f"r{seed}")])
               for seed in (0, 1)]
    return root / "r0", root / "r1", results


def test_evaluating_a_run_reproduces_its_test_metrics(two_runs, tmp_path):
    run0, _, results = two_runs
    summary = evaluate.main([str(run0), "--output", str(tmp_path / "e")])
    assert summary["test"]["t2v"] == pytest.approx(results[0]["test"]["t2v"])
    saved = json.loads((tmp_path / "e" / "metrics.json").read_text())
    assert saved["test"]["v2t"] == pytest.approx(results[0]["test"]["v2t"])
    assert np.load(tmp_path / "e" / "predictions.npz")["ranks_t2v"].shape == (20,)


def test_fuse_sums_similarities(two_runs, tmp_path):
    run0, run1, _ = two_runs
    evaluate.main(["--fuse", str(run0), str(run1), "--output", str(tmp_path / "sum")])
    fused = read_predictions(tmp_path / "sum" / "predictions.npz")
    singles = []
    for i, run in enumerate((run0, run1)):
        evaluate.main([str(run), "--output", str(tmp_path / f"s{i}")])
        singles.append(read_predictions(tmp_path / f"s{i}" / "predictions.npz"))
    np.testing.assert_allclose(fused.sims, singles[0].sims + singles[1].sims, rtol=1e-5, atol=1e-6)
    assert fused.sims_v2t is None  # one matrix serves both directions
    np.testing.assert_array_equal(fused.caption_ids, singles[0].caption_ids)


def test_the_old_ensemble_flag_still_fuses(two_runs, tmp_path):
    run0, run1, _ = two_runs
    for flag in ("--fuse", "--ensemble"):
        out = tmp_path / flag
        evaluate.main([flag, str(run0), str(run1), "--fusion", "max", "--output", str(out)])
    new, old = (read_predictions(tmp_path / f / "predictions.npz")
                for f in ("--fuse", "--ensemble"))
    np.testing.assert_array_equal(old.sims, new.sims)
    np.testing.assert_array_equal(old.ranks_v2t, new.ranks_v2t)
    saved = json.loads((tmp_path / "--ensemble" / "metrics.json").read_text())
    assert saved["combination"] == "max"


@pytest.mark.parametrize("how", ["avg", "max", "hybrid"])
def test_rank_fusion_fuses_the_runs_rankings(two_runs, tmp_path, how):
    from rudder.evaluation import fusion, metrics

    run0, run1, _ = two_runs
    argv = ["--fuse", str(run0), str(run1), "--fusion", how, "--output", str(tmp_path / how)]
    summary = evaluate.main(argv)
    singles = []
    for i, run in enumerate((run0, run1)):
        evaluate.main([str(run), "--output", str(tmp_path / f"{how}-{i}")])
        singles.append(read_predictions(tmp_path / f"{how}-{i}" / "predictions.npz"))
    masks = singles[0].query_masks
    expected = fusion.fuse_ranks([p.sims for p in singles], how, 2 if how == "hybrid" else None)
    t2v = metrics.retrieval_metrics(expected, query_masks=masks, direction="t2v")
    for key in ("R1", "R5", "MdR", "MnR"):
        assert summary["test"]["t2v"][key] == pytest.approx(t2v[key])
    # v2t is fused per video query; the saved predictions carry its scores and ranks
    fused = read_predictions(tmp_path / how / "predictions.npz")
    assert fused.sims_v2t is not None
    v2t = metrics.metrics_from_ranks(fused.ranks_v2t)
    for key in ("R1", "R5", "MdR", "MnR"):
        assert summary["test"]["v2t"][key] == pytest.approx(v2t[key])


def test_load_run_and_errors(two_runs, tmp_path):
    run0, _, _ = two_runs
    loaded = load_run(run0)
    assert loaded.experts == ["audio@mr", "object"] and not loaded.model.training
    with pytest.raises(RunError, match="holds no checkpoint"):
        load_run(tmp_path)
    with pytest.raises(SystemExit):
        evaluate.main([str(tmp_path)])


def test_several_runs_are_evaluated_one_by_one(two_runs, tmp_path):
    run0, run1, results = two_runs
    summaries = evaluate.main([str(run0), str(run1), "--output", str(tmp_path / "each")])
    assert list(summaries) == [str(run0), str(run1)]
    for i, (run, result) in enumerate(zip((run0, run1), results, strict=True)):
        assert summaries[str(run)]["test"]["t2v"] == pytest.approx(result["test"]["t2v"])
        saved = json.loads((tmp_path / "each" / f"{i}-{run.name}" / "metrics.json").read_text())
        assert saved["runs"] == [str(run)] and saved["combination"] is None


def test_fusions_do_not_overwrite_each_other(two_runs):
    run0, run1, _ = two_runs
    for how in ("sum", "avg"):
        evaluate.main(["--fuse", str(run0), str(run1), "--fusion", how])
    evaluate.main([str(run0)])
    folders = run0 / "evaluations"
    expected = (("test-fusion-sum", "sum"), ("test-fusion-avg", "avg"), ("test-single", None))
    for name, combination in expected:
        assert json.loads(
            (folders / name / "metrics.json").read_text())["combination"] == combination


@pytest.mark.parametrize("argv", [["A", "--fuse", "B", "C"], ["A", "--ensemble", "B", "C"],
                                  ["A", "--fusion", "avg"], ["--fuse", "A"], []])
def test_ambiguous_combinations_are_refused(argv, capsys):
    with pytest.raises(SystemExit) as exit_info:
        evaluate.main(argv)
    assert exit_info.value.code == 2 and "error:" in capsys.readouterr().err


def _one_error_line(capsys) -> str:
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("error: ") and "Traceback" not in err[0], err
    return err[0]


def test_another_dataset_without_the_runs_experts_names_them(two_runs, tiny_dataset, tmp_path,
                                                              capsys):
    """``evaluate RUN --dataset OTHER`` whose experts differ ended in KeyError."""
    import shutil

    from rudder.data.layout import DatasetFolder

    other = tmp_path / "other"
    shutil.copytree(tiny_dataset, other)
    meta = json.loads((other / "rudder.json").read_text())
    del meta["experts"]["object"]
    (other / "rudder.json").write_text(json.dumps(meta))
    assert "object" not in DatasetFolder(other).experts
    with pytest.raises(SystemExit) as exit_info:
        evaluate.main([str(two_runs[0]), "--dataset", str(other), "--output", str(tmp_path / "e")])
    line = _one_error_line(capsys)
    assert exit_info.value.code == 2 and "lacks ['object']" in line and str(other) in line
    assert not (tmp_path / "e").exists()


@pytest.mark.parametrize("flags, named", [
    (["--fusion", "hybrid", "--hybrid-q", "-1"], "argument --hybrid-q: -1 is outside"),
    (["--fusion", "hybrid", "--hybrid-q", "3"], "argument --hybrid-q: 3 is more than the 2"),
])
def test_hybrid_q_is_checked_before_loading(two_runs, flags, named, capsys, monkeypatch):
    """--hybrid-q -1 was refused after 17 s of loading and scoring."""
    monkeypatch.setattr(evaluate, "load_run", lambda *a, **k: pytest.fail("loaded a run"))
    with pytest.raises(SystemExit) as exit_info:
        evaluate.main(["--fuse", str(two_runs[0]), str(two_runs[1]), *flags])
    assert exit_info.value.code == 2 and named in _one_error_line(capsys)


def test_output_naming_a_file_is_refused_before_loading(two_runs, tmp_path, capsys):
    taken = tmp_path / "metrics.txt"
    taken.write_text("keep")
    with pytest.raises(SystemExit) as exit_info:
        evaluate.main([str(two_runs[0]), "--output", str(taken)])
    line = _one_error_line(capsys)
    assert exit_info.value.code == 2 and f"argument --output: {taken} is a file" in line
    assert taken.read_text() == "keep"
