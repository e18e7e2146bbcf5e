"""experiments.tune: equal budgets, pinned and invalid grid points, selection on validation
only, the tuned file, and the runner applying it."""

import json

import pytest
import yaml

from experiments import run, tune
from experiments.suites import SuiteError, load_suite
from rudder.runs.checkpoints import load_checkpoint

from .conftest import write_suite

TUNE = {
    "trials": 2,
    "epochs": 1,
    "seed": 0,
    "grids": {
        "mm": {"loss.params.margin": [0.05, 0.2, 0.4]},
        # m1 = 0.3 breaks p < m1 < m2 = 0.15 < n: those points are left out.
        "po": {"loss.params.m1": [0.05, 0.3], "loss.params.n": [0.2, 0.4]},
    },
}


def _argv(root, out, dataset, *extra):
    return ["two", "--dataset", str(dataset), "--suites-dir", str(root),
            "--runs-dir", str(out / "runs"), *extra]  # fmt: skip


@pytest.fixture(scope="module")
def tuned(tiny_dataset, tmp_path_factory):
    root = tmp_path_factory.mktemp("tune-suites")
    write_suite(
        root,
        "tuned",
        [
            ("mm", "MM", "mm", {}),
            ("po", "PO", "po", {}),
            ("po-n", "PO n", "po", {"loss": {"params": {"n": 0.4}}}),
        ],
        tune={**TUNE, "trials": 1},
    )
    write_suite(root, "two", [("mm", "MM", "mm", {}), ("po", "PO", "po", {})], tune=TUNE)
    out = tmp_path_factory.mktemp("tune-out")
    argv = _argv(root, out, tiny_dataset, "--output", str(out / "results"))
    assert tune.main(argv) == 0
    return root, out, argv


def test_each_row_gets_the_same_number_of_trials_defaults_first(tuned):
    suite = load_suite("two", tuned[0])
    spec = tune.tune_spec(suite)
    mm, po = (tune.candidates(row, spec) for row in suite.rows)
    assert mm[0] == {"loss.params.margin": 0.2}  # the loss default comes first
    assert len(mm) == len(po) == 2
    # The two valid PO points (m1 = 0.3 rejected by the loss), default first.
    assert po == [
        {"loss.params.m1": 0.05, "loss.params.n": 0.2},
        {"loss.params.m1": 0.05, "loss.params.n": 0.4},
    ]
    assert tune.candidates(suite.rows[0], spec) == mm  # deterministic


def test_a_row_pins_the_keys_it_sets(tuned):
    pinned = load_suite("tuned", tuned[0]).rows[2]
    assert tune.candidates(pinned, tune.tune_spec(load_suite("tuned", tuned[0]))) == [
        {"loss.params.m1": 0.05}
    ]
    spec = tune.tune_spec(load_suite("two", tuned[0]))
    with pytest.raises(SuiteError, match="1 valid point.*fewer than tune.trials=2"):
        tune.candidates(pinned, spec)


def test_best_trial_breaks_ties_by_grid_order():
    assert tune.best_trial([({}, 1.0), ({}, 2.0), ({}, 2.0)]) == 1


def test_trials_select_on_validation_and_never_test(tuned):
    _, out, _ = tuned
    document = yaml.safe_load((out / "results" / "two-tuned.yaml").read_text())
    assert document["selected_on"] == "validation" and document["budget"]["trials"] == 2
    for label in ("MM", "PO"):
        row = document["rows"][label]
        scores = [t["validation"] for t in row["trials"]]
        assert len(scores) == 2
        assert (
            row["chosen"] == row["trials"][tune.best_trial([(None, s) for s in scores])]["settings"]
        )
    trial_dirs = sorted((out / "runs" / "tune").glob("*/seed-0"))
    assert len(trial_dirs) == 4
    for trial in trial_dirs:
        assert (
            not (trial / "metrics.json").exists()
            and not (trial / "predictions" / "test.npz").exists()
        )
        evals = [json.loads(line) for line in (trial / "metrics.jsonl").read_text().splitlines()]
        assert {e["split"] for e in evals} == {"validation"}
        summary = json.loads((trial / tune.TRIAL_FILE).read_text())
        best_pt = load_checkpoint(trial / "checkpoints" / "best.pt")
        assert summary["best_epoch"] == best_pt["epoch"]  # the trainer's choice, ties included
        assert summary["validation"] == best_pt["best_score"] == max(e["selection"] for e in evals)


def test_a_second_invocation_trains_nothing_and_a_lost_summary_is_recovered(tuned, monkeypatch):
    _, out, argv = tuned
    path = out / "results" / "two-tuned.yaml"
    before = yaml.safe_load(path.read_text())["rows"]
    summary = next((out / "runs" / "tune").glob("tiny-mm-*/seed-0")) / tune.TRIAL_FILE
    summary.unlink()  # killed after training, before the summary: resumes at the last epoch
    fits = []
    original = tune.fit_without_test
    monkeypatch.setattr(
        tune, "fit_without_test", lambda *a, **k: fits.append(k) or original(*a, **k)
    )
    assert tune.main(argv) == 0
    assert fits == [{"resume": True, "overwrite": False}]
    assert yaml.safe_load(path.read_text())["rows"] == before


def test_the_runner_applies_the_tuned_settings(tuned, tiny_dataset, capsys):
    root, out, _ = tuned
    chosen = yaml.safe_load((out / "results" / "two-tuned.yaml").read_text())["rows"]
    suite = load_suite("two", root)
    jobs = run.plan(
        suite, 1, out / "runs", str(tiny_dataset), tuned=out / "results" / "two-tuned.yaml"
    )
    for job in jobs:
        for key, value in chosen[job.row.label]["chosen"].items():
            section, *rest = key.split(".")
            node = getattr(job.config, section)
            for part in rest[:-1]:
                node = node[part] if isinstance(node, dict) else getattr(node, part)
            got = node[rest[-1]] if isinstance(node, dict) else getattr(node, rest[-1])
            assert got == value
    untuned = run.plan(suite, 1, out / "runs", str(tiny_dataset))
    assert {j.run_dir for j in jobs} != {j.run_dir for j in untuned}
    from experiments.suite_report import _settings_text

    margin = chosen["MM"]["chosen"]["loss.params.margin"]
    assert f"MM: margin {margin}" in _settings_text(suite, jobs)
    assert _settings_text(suite, untuned) == "every row at its YAML's settings (not tuned)"
    run_argv = _argv(root, out, tiny_dataset, "--dry-run")
    assert run.main([*run_argv, "--output", str(out / "nowhere")]) == 2
    err = capsys.readouterr().err
    assert "python -m experiments.tune two" in err and "--untuned" in err
    assert run.main([*run_argv, "--output", str(out / "nowhere"), "--untuned"]) == 0


def test_a_tuned_file_from_another_row_yaml_is_refused(tuned, tiny_dataset):
    root, out, _ = tuned
    suite = load_suite("two", root)
    row_file = suite.rows[0].path
    original = row_file.read_text()
    try:
        row_file.write_text(original.replace("batch_size: 6", "batch_size: 5"))
        with pytest.raises(SuiteError, match="tuned on another row YAML or dataset"):
            run.plan(
                load_suite("two", root),
                1,
                out / "runs",
                str(tiny_dataset),
                tuned=out / "results" / "two-tuned.yaml",
            )
    finally:
        row_file.write_text(original)


def test_a_row_selected_on_test_cannot_be_tuned(tmp_path, tiny_dataset):
    write_suite(tmp_path, "t", [("mm", "MM", "mm", {"data": {"val_split": "test"}})], tune=TUNE)
    suite = load_suite("t", tmp_path)
    with pytest.raises(SuiteError, match="validation split only"):
        tune.trial_jobs(suite, tune.tune_spec(suite), tmp_path / "runs", str(tiny_dataset))


@pytest.mark.parametrize(
    "section, message",
    [
        ({"trials": 2, "grids": {"mm": {"optim.lr": [1]}}}, "needs keys trials, epochs, grids"),
        ({**TUNE, "trials": 0}, "positive integers"),
        ({**TUNE, "grids": {"mm": {"optim.lr": []}}}, "must map loss names"),
        ({**TUNE, "grids": {"po": {"optim.lr": [0.001, 0.01]}}}, "no grid for loss 'mm'"),
        ({**TUNE, "grids": {"mm": {"loss.params.margn": [0.1, 0.2]}}}, "unknown parameter.*margn"),
        (
            {**TUNE, "grids": {"mm": {"supervision.rho": [0.25, 0.5]}}},
            "hold supervision.rho, which the suite's evaluation protocol fixes",
        ),
    ],
)
def test_bad_tune_sections_are_clear_errors(tmp_path, section, message):
    write_suite(tmp_path, "bad", [("mm", "MM", "mm", {})], tune=section)
    suite = load_suite("bad", tmp_path)
    with pytest.raises(SuiteError, match=message):
        tune.candidates(suite.rows[0], tune.tune_spec(suite))


def test_committed_suites_give_every_row_the_same_budget():
    for name in ("rudder-table1", "rudder-multilingual", "relevance"):
        suite = load_suite(name)
        spec = tune.tune_spec(suite)
        for row in suite.rows:
            points = tune.candidates(row, spec)
            assert (
                len(points) == spec.trials
                and len({json.dumps(p, sort_keys=True) for p in points}) == spec.trials
            )
            assert points[0] == tune.row_settings(row, list(points[0]))  # the defaults are a trial
    assert load_suite("msrvtt-1ka").tune is None


def test_tune_must_be_a_mapping_or_a_file(tmp_path):
    write_suite(tmp_path, "bad", [("mm", "MM", "mm", {})], tune=5)
    with pytest.raises(SuiteError, match="tune must be a mapping or the name of a YAML file"):
        load_suite("bad", tmp_path)
    (tmp_path / "grids.yaml").write_text(yaml.safe_dump(TUNE))
    write_suite(tmp_path, "file", [("mm", "MM", "mm", {})], tune="../grids.yaml")
    assert load_suite("file", tmp_path).tune == TUNE


def test_settings_reach_the_config_unchanged():
    from experiments.suites import Row, row_config

    row = Row("MM", None, {"loss": {"name": "mm"}})
    config = row_config(row, settings={"optim.lr": 1e-05, "loss.params.margin": 0.1})
    assert config.optim.lr == 1e-05 and config.loss.params == {"margin": 0.1}


@pytest.mark.parametrize("content", [b"rows: [1, 2", b"just text", b"rows: {mm: 3}",
                                     b"\xff\xfe not utf-8", b"rows: {mm: {row_key: x}}"],
                         ids=["bad-yaml", "scalar", "row-not-mapping", "binary", "no-chosen"])
def test_a_malformed_tuned_file_is_one_error_line(tiny_dataset, tmp_path, capsys, content):
    """experiments.run --tuned MALFORMED.yaml used to end in a traceback."""
    root = tmp_path / "suites"
    write_suite(root, "two", [("mm", "MM", "mm", {}), ("po", "PO", "po", {})], tune=TUNE)
    bad = tmp_path / "bad.yaml"
    bad.write_bytes(content)
    code = run.main([*_argv(root, tmp_path, tiny_dataset), "--tuned", str(bad), "--dry-run"])
    err = capsys.readouterr().err.strip().splitlines()
    assert code == 2 and len(err) == 1 and err[0].startswith(f"error: {bad}: ")
    assert "Traceback" not in err[0]


def test_shared_settings_join_every_loss_grid_and_are_not_listed_twice(tmp_path):
    shared = {**TUNE, "shared": {"optim.lr": [0.0005, 0.001]}}
    write_suite(tmp_path, "s", [("mm", "MM", "mm", {}), ("po", "PO", "po", {})], tune=shared)
    suite = load_suite("s", tmp_path)
    spec = tune.tune_spec(suite)
    for row in suite.rows:
        assert tune.row_grid(row, spec)["optim.lr"] == [0.0005, 0.001]
    assert tune.candidates(suite.rows[0], spec)[0] == {"optim.lr": 0.001,
                                                       "loss.params.margin": 0.2}
    twice = {**shared, "grids": {**TUNE["grids"], "mm": {"optim.lr": [0.1, 0.2]}}}
    write_suite(tmp_path, "t", [("mm", "MM", "mm", {})], tune=twice)
    with pytest.raises(SuiteError, match=r"grids list shared key\(s\) \(mm: optim.lr\)"):
        tune.tune_spec(load_suite("t", tmp_path))


def test_committed_grids_offer_every_row_the_same_learning_rates():
    for name in ("rudder-table1", "rudder-multilingual", "relevance", "epic-relevance"):
        suite = load_suite(name)
        spec = tune.tune_spec(suite)
        grids = {row.label: tune.row_grid(row, spec)["optim.lr"] for row in suite.rows}
        assert len({tuple(g) for g in grids.values()}) == 1, grids
        assert 0.002 in next(iter(grids.values()))  # what the relevance margin once had alone


@pytest.mark.parametrize("values, up, expected", [
    ([0.05, 0.1, 0.2, 0.4], True, 0.8),  # geometric: the outermost ratio
    ([0.05, 0.1, 0.2, 0.4], False, 0.025),
    ([0.00025, 0.0005, 0.001, 0.002], True, 0.004),
    ([0.25, 0.5, 0.75], True, 1.125),  # positive values: the ratio of the outermost two
    ([-1.0, 0.0, 1.0], True, 2.0),  # not all positive: the difference
    ([-1.0, 0.0, 1.0], False, -2.0),
])
def test_next_value_continues_the_grid(values, up, expected):
    assert tune.next_value(values, up) == pytest.approx(expected)


def test_a_choice_at_a_grid_edge_extends_the_grid(tmp_path):
    spec_section = {**TUNE, "trials": 2, "edge_steps": 2,
                    "shared": {"optim.lr": [0.0005, 0.001]},
                    "grids": {"mm": {"loss.params.margin": [0.1, 0.2]},
                              "ran": {"loss.params.tau": [0.5, 0.75]}}}
    write_suite(tmp_path, "e", [("mm", "MM", "mm", {}), ("ran", "RAN", "ran", {})],
                tune=spec_section)
    suite = load_suite("e", tmp_path)
    spec = tune.tune_spec(suite)
    mm, ran = suite.rows
    trained = []

    def score(settings):  # validation rises with the margin and falls with the lr
        trained.append(settings)
        return 10 * settings.get("loss.params.margin", 0) + settings.get("loss.params.tau", 0) \
            - 1000 * settings["optim.lr"]

    start = [(s, score(s)) for s in tune.candidates(mm, spec)]
    trained.clear()
    scored, at_edge = tune.extend_at_edges(mm, spec, start, score, log=lambda _: None)
    best = scored[tune.best_trial(scored)][0]
    # From the best grid point (lr 0.0005, margin 0.2), both at an edge, round 1 tries
    # margin 0.4 and lr 0.00025 (score 3.5 and 1.75): margin 0.4 wins, and lr 0.0005 is no
    # longer an edge of the extended lr grid. Round 2: margin 0.8. Then the step limit (2).
    assert best == {"optim.lr": 0.0005, "loss.params.margin": 0.8}
    assert trained == [{"optim.lr": 0.00025, "loss.params.margin": 0.2},
                       {"optim.lr": 0.0005, "loss.params.margin": 0.4},
                       {"optim.lr": 0.0005, "loss.params.margin": 0.8}]
    assert len(scored) == len(start) + 3
    assert list(at_edge) == ["loss.params.margin"]
    assert "extended 2 time(s)" in at_edge["loss.params.margin"]
    # tau 0.75 -> 1.125 is rejected by the loss (tau <= 1): a bound, no trial
    start = [(s, score(s)) for s in tune.candidates(ran, spec)]
    trained.clear()
    scored, at_edge = tune.extend_at_edges(ran, spec, start, score, log=lambda _: None)
    assert "the next value 1.125 is invalid" in at_edge["loss.params.tau"]
    assert all(s.get("loss.params.tau") != 1.125 for s in trained)
