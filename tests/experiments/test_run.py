"""The runner end to end on a tiny dataset: 3 rows x 2 seeds, 1 epoch, fusion, tables, plots;
then a second invocation that must train nothing."""

import csv
import json
import shutil
from pathlib import Path

import numpy as np
import pytest

from experiments import run
from experiments.suites import load_suite


@pytest.fixture(scope="module")
def finished(tiny_suites, tiny_dataset, tmp_path_factory):
    out = tmp_path_factory.mktemp("out")
    argv = [
        "tiny",
        "--seeds",
        "2",
        "--dataset",
        str(tiny_dataset),
        "--suites-dir",
        str(tiny_suites),
        "--runs-dir",
        str(out / "runs"),
        "--output",
        str(out / "results"),
    ]
    assert run.main(argv) == 0
    return out, argv


def test_every_run_and_output_is_written(finished):
    out, _ = finished
    runs = sorted(p.parent for p in (out / "runs").glob("tiny-*/seed-*/metrics.json"))
    assert len(runs) == 3 * 2
    for r in runs:
        assert json.loads((r / "timing.json").read_text())["sessions"] == 1
        assert (r / "predictions" / "test.npz").is_file()
    for name in ("tiny.md", "tiny.csv", "tiny-tests.csv", "tiny-ranks.npz", "tiny-recall.png",
                 "tiny-hardneg.png"):
        assert (out / "results" / name).is_file(), name
    for png in (out / "results").glob("*.png"):
        assert png.stat().st_size < 200_000


def test_tables_agree_with_the_runs(finished):
    out, _ = finished
    rows = list(csv.DictReader((out / "results" / "tiny.csv").open()))
    labels = {r["row"] for r in rows}
    assert labels == {
        "MM", "PO(M)", "RAN", "Fusion AVG (mixed losses)", "Fusion HYBRID (mixed losses, Q'=1)",
        "Fusion MAX (RAN)",
    }
    pooled = [r for r in rows if r["row"] == "Fusion MAX (RAN)"]
    assert {r["seeds"] for r in pooled} == {"1"}  # both seeds of RAN fused into one model
    assert {r["std"] for r in pooled if r["metric"] != "runs_at_epoch_cap"} <= {"n/a"}
    mm = sorted((out / "runs").glob("tiny-mm-*/seed-*/metrics.json"))
    r1 = [json.loads(p.read_text())["test"]["t2v"]["R1"] for p in mm]
    row = next(
        r for r in rows if r["row"] == "MM" and r["direction"] == "t2v" and r["metric"] == "R1"
    )
    assert float(row["mean"]) == pytest.approx(np.mean(r1), abs=1e-4)
    assert float(row["std"]) == pytest.approx(np.std(r1, ddof=1), abs=1e-4)
    assert float(row["ci_low"]) <= float(row["mean"]) <= float(row["ci_high"])
    assert {r["metric"] for r in rows} >= {"R1", "R5", "R10", "R50", "MdR", "MnR", "nDCG", "mAP"}
    at_cap = {r["row"]: r["mean"] for r in rows if r["metric"] == "runs_at_epoch_cap"}
    assert set(at_cap) == labels  # one line per row (1-epoch runs: every run at the cap)
    assert at_cap["MM"] == "2" and at_cap["Fusion AVG (mixed losses)"] == "4"
    assert at_cap["Fusion MAX (RAN)"] == "2"
    assert "MAX of RAN (one loss; every seed pooled into one fused model: Q = 2 models" in (
        out / "results" / "tiny.md").read_text()
    text = (out / "results" / "tiny.md").read_text()
    assert "python -m experiments.run tiny --seeds 2" in text and "**Machine**:" in text
    assert "**Evaluation protocol**: nDCG and mAP at rho 0.25" in text
    assert "6 of 6 runs stopped at the epoch cap" in text
    assert "*validation*" in text  # the best row is chosen on validation
    tests = list(csv.DictReader((out / "results" / "tiny-tests.csv").open()))
    assert [(t["a"], t["b"], t["direction"]) for t in tests[:2]] == [
        ("PO(M)", "MM", "t2v"), ("PO(M)", "MM", "v2t")]
    assert tests[2]["a"] in ("RAN", "PO(M)") and tests[2]["b"] == "MM"  # "best" resolved to a row
    # 8 test videos x 2 captions (seed-averaged); v2t: the 8 videos only.
    assert all(int(t["captions"]) == 8 * 2 for t in tests if t["direction"] == "t2v")
    assert all(int(t["videos"]) == 8 and t["p_video_holm"] for t in tests)


def test_the_committed_ranks_reproduce_every_table(finished, tiny_dataset):
    from experiments import report
    from experiments.archive import read_archive

    out, _ = finished
    results = out / "results"
    with np.load(results / "tiny-ranks.npz", allow_pickle=False) as npz:
        assert set(npz["run_label"]) == {"MM", "PO(M)", "RAN", "Fusion AVG (mixed losses)",
                                         "Fusion HYBRID (mixed losses, Q'=1)", "Fusion MAX (RAN)"}
        assert npz["t2v_rank"].dtype == np.float32 and npz["t2v_nDCG"].dtype == np.float32
        assert set(npz["run_seed"][npz["run_label"] == "MM"]) == {0, 1}
        assert list(npz["run_seed"][npz["run_label"] == "Fusion MAX (RAN)"]) == [-1]  # pooled
        assert all(len(c) >= 7 for c in npz["run_commit"])  # a git commit (or "unknown")
        fingerprint = str(npz["dataset_fingerprint"])
    from rudder.data.lookup import resolve_dataset

    assert fingerprint == resolve_dataset(str(tiny_dataset)).fingerprint()
    rows, _meta = read_archive(results / "tiny-ranks.npz")
    mm = sorted((out / "runs").glob("tiny-mm-*/seed-*/predictions/test.npz"))
    from rudder.runs.layout import read_predictions

    for i, path in enumerate(mm):
        np.testing.assert_array_equal(rows["MM"].ranks["t2v"][i], read_predictions(path).ranks_t2v)
    assert report.main(["tiny", "--output", str(results), "--check"]) == 0
    table = results / "tiny.csv"
    original = table.read_text()
    try:
        table.write_text(original.replace("tiny,MM,t2v,R1,", "tiny,MM,t2v,R1,1", 1))
        assert report.main(["tiny", "--output", str(results), "--check"]) == 1
        assert report.main(["tiny", "--output", str(results)]) == 0  # rewritten from the ranks
        assert table.read_text() == original
    finally:
        table.write_text(original)
    assert report.main(["nope", "--output", str(results), "--check"]) == 2


def test_fusion_rows_match_rudder_evaluate(finished, tiny_suites):
    from rudder.evaluation.evaluate import evaluate_runs

    out, _ = finished
    ran = min((out / "runs").glob("tiny-ran-*/seed-0"))
    po = min((out / "runs").glob("tiny-po-m-*/seed-0"))
    expected, _, _, _ = evaluate_runs([ran, po], how="avg")
    fused = json.loads(
        next((out / "runs" / "fusion").glob("avg-*/seed-0/metrics.json")).read_text()
    )
    assert fused["test"]["t2v"]["R1"] == pytest.approx(expected["t2v"]["R1"])
    assert fused["test"]["v2t"]["MnR"] == pytest.approx(expected["v2t"]["MnR"])


def test_second_invocation_trains_nothing(finished, monkeypatch, capsys):
    out, argv = finished
    before = {p: p.stat().st_mtime_ns for p in (out / "runs").rglob("checkpoints/*.pt")}

    def refuse(*args, **kwargs):
        raise AssertionError("a finished run was trained again")

    monkeypatch.setattr("rudder.train.run", refuse)
    assert run.main(argv) == 0
    assert {p: p.stat().st_mtime_ns for p in (out / "runs").rglob("checkpoints/*.pt")} == before
    assert capsys.readouterr().out.count("[done  ]") == 6


def test_an_interrupted_run_resumes_from_last_checkpoint(
    tiny_suites, tiny_dataset, tmp_path, monkeypatch
):
    from rudder.training.trainer import Trainer

    job = run.plan(
        load_suite("tiny", tiny_suites), 1, tmp_path / "runs", str(tiny_dataset), epochs=2
    )[0]
    save = Trainer._save

    def save_then_stop(self, name):  # the process dies right after epoch 1's checkpoint
        save(self, name)
        if name == "last" and self.epoch == 1:
            raise KeyboardInterrupt

    monkeypatch.setattr(Trainer, "_save", save_then_stop)
    with pytest.raises(KeyboardInterrupt):
        run.train_job(job)
    assert job.status == "resume"
    monkeypatch.setattr(Trainer, "_save", save)
    calls = []
    from rudder import train

    original = train.run
    monkeypatch.setattr(
        train,
        "run",
        lambda config, run_dir, resume, overwrite: (
            calls.append((resume, overwrite)) or original(config, run_dir, resume, overwrite)
        ),
    )
    run.train_job(job)
    assert calls == [(True, False)]
    lines = (job.run_dir / "metrics.jsonl").read_text().splitlines()
    assert [json.loads(line)["epoch"] for line in lines] == [1, 2]
    assert job.status == "done"


def test_real_dataset_suite_needs_dataset(capsys):
    assert run.main(["charades-sta", "--dry-run"]) == 2
    err = capsys.readouterr().err
    assert "needs --dataset DIR" in err and "datasets_scripts build" in err


def test_epochs_below_one_is_a_flag_error(capsys):
    with pytest.raises(SystemExit) as exit_info:  # refused by the parser, before any work
        run.main(["rudder-table1", "--untuned", "--epochs", "0", "--dry-run"])
    err = capsys.readouterr().err
    assert exit_info.value.code == 2 and len(err.strip().splitlines()) == 1
    assert "argument --epochs: 0 is outside [1, " in err and ".yaml" not in err


def test_unknown_suite_lists_the_suites(capsys):
    assert run.main(["nonsense", "--dry-run"]) == 2
    assert "rudder-table1" in capsys.readouterr().err


def test_help(capsys):
    with pytest.raises(SystemExit) as exit_info:
        run.main(["--help"])
    assert exit_info.value.code == 0
    assert "--seeds" in capsys.readouterr().out


def test_a_run_trained_with_other_settings_is_refused(finished, capsys):
    out, argv = finished
    config_path = next((out / "runs").glob("tiny-mm-*/seed-0/config.yaml"))
    original = config_path.read_text()
    try:
        config_path.write_text(original.replace("lr: 0.001", "lr: 0.5"))
        assert run.main(argv) == 2
        err = capsys.readouterr().err
        assert "optim.lr: 0.5 in the run, 0.001 now" in err and "delete" in err
    finally:
        config_path.write_text(original)


def test_a_changed_loss_default_makes_a_run_stale(finished, monkeypatch, capsys):
    from rudder.losses.max_margin import MaxMargin

    _, argv = finished
    monkeypatch.setattr(MaxMargin.__init__, "__defaults__", (0.05,))  # was 0.2
    assert run.main(argv) == 2
    err = capsys.readouterr().err
    assert "2 run(s)" in err and "loss.params.margin: 0.2 in the run, 0.05 now" in err


def _copied(finished, tmp_path) -> tuple[Path, list[str]]:
    """A copy of the finished runs (without the fusion cache) and argv pointing at it."""
    out, argv = finished
    runs = tmp_path / "runs"
    shutil.copytree(out / "runs", runs, ignore=shutil.ignore_patterns("fusion"))
    argv = argv[: argv.index("--runs-dir")] + ["--runs-dir", str(runs)]
    return runs, argv + ["--output", str(tmp_path / "results")]


def test_the_report_rescores_no_checkpoint(finished, tmp_path, monkeypatch):
    runs, argv = _copied(finished, tmp_path)

    def refuse(*args, **kwargs):
        raise AssertionError("the report re-scored a checkpoint")

    monkeypatch.setattr("rudder.evaluation.inference.similarity_matrix", refuse)
    monkeypatch.setattr("rudder.evaluation.evaluate.similarity_matrix", refuse)
    assert run.main(argv) == 0
    assert (tmp_path / "results" / "tiny-hardneg.png").is_file()
    for fused in (runs / "fusion").glob("*/seed-*/metrics.json"):
        cached = finished[0] / "runs" / fused.relative_to(runs)
        assert json.loads(fused.read_text())["test"] == json.loads(cached.read_text())["test"]


def test_the_header_names_the_commits_the_runs_were_trained_at(finished, tmp_path):
    runs, argv = _copied(finished, tmp_path)
    text = (finished[0] / "results" / "tiny.md").read_text()
    sha = json.loads(next(runs.glob("tiny-mm-*/seed-0/env.json")).read_text())["git_sha"]
    assert f"runs trained at git {str(sha)[:10]}; report written at git" in text
    env = next(runs.glob("tiny-mm-*/seed-1/env.json"))
    env.write_text(json.dumps({**json.loads(env.read_text()), "git_sha": "0123456789abcdef"}))
    assert run.main(argv) == 0
    text = (tmp_path / "results" / "tiny.md").read_text()
    assert f"several commits: git {str(sha)[:10]} (" in text
    assert f"git 0123456789 ({env.parent.parent.name}/seed-1)" in text


def test_a_report_error_is_one_line(finished, tmp_path, capsys):
    runs, argv = _copied(finished, tmp_path)
    broken = next(runs.glob("tiny-ran-*/seed-0/predictions/test.npz"))
    broken.write_bytes(b"not a zip")
    assert run.main(argv) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: the report of suite tiny:") and str(broken) in err
    assert len(err.splitlines()) == 1


def test_fusion_is_redone_when_a_member_changes(finished):
    out, argv = finished
    fused = next((out / "runs" / "fusion").glob("avg-*/seed-0/metrics.json"))
    before = json.loads(fused.read_text())["members_digest"]
    member = Path(json.loads(fused.read_text())["members"][0]) / "metrics.json"
    original = member.read_text()
    try:
        member.write_text(original + "\n")  # same numbers, another file: as if retrained
        assert run.main(argv) == 0
        assert json.loads(fused.read_text())["members_digest"] != before
    finally:
        member.write_text(original)
        assert run.main(argv) == 0
