"""Run folders: nothing is made before the config is valid, a failed run leaves nothing
behind, and a resume keeps the saved config."""

import json
import shutil

import pyarrow as pa
import pytest
import yaml

from rudder import train
from rudder.data.layout import DatasetFolder
from rudder.data.layout_writer import replace_tables


def error_line(capsys) -> str:
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("error: "), err
    return err[0]


def saved_config(run) -> dict:
    return yaml.safe_load((run / "config.yaml").read_text())


def epochs_logged(run) -> list[int]:
    return [json.loads(line)["epoch"] for line in (run / "metrics.jsonl").read_text().splitlines()]


@pytest.mark.parametrize(("override", "named"), [
    ("data.batch_size=abc", "data.batch_size='abc' is not valid; expected an integer >= 2"),
    ("optim.lr=fast", "optim.lr='fast' is not valid; expected a finite number >= 0.0"),
    ("supervision.alpha_n=2", "supervision.alpha_n=2.0 is not valid; expected in [0.0, 1.0]"),
    ("selection=t2v.R7",
     "selection='t2v.R7' is not valid; expected one of ['t2v.gmean_r5_r10_r50',"),
])
def test_a_bad_value_stops_before_any_folder_is_made(train_tiny, tmp_path, capsys, override, named):
    with pytest.raises(SystemExit) as exit_info:
        train_tiny(tmp_path / "run", "--set", override)
    assert exit_info.value.code == 2
    assert named in error_line(capsys)
    assert not (tmp_path / "run").exists()


def test_a_bad_config_file_is_named(tmp_path, capsys):
    config = tmp_path / "typo.yaml"
    config.write_text("los: {name: mm}\n", encoding="utf-8")
    with pytest.raises(SystemExit):
        train.main(["--config", str(config), "--output-dir", str(tmp_path / "run")])
    line = error_line(capsys)
    assert line.startswith(f"error: {config}: unknown key(s) ['los'] (did you mean 'loss'?)")
    with pytest.raises(SystemExit):
        train.main(["--config", str(config), "--epochs", "2", "--output-dir", str(tmp_path / "r")])
    assert f"{config} with the command-line settings: unknown key(s)" in error_line(capsys)


def test_a_bad_saved_config_is_named_on_resume(train_tiny, tmp_path, capsys):
    train_tiny(tmp_path / "run", "--epochs", "1")
    capsys.readouterr()
    saved = tmp_path / "run" / "config.yaml"
    saved.write_text(saved.read_text() + "los: {name: mm}\n", encoding="utf-8")
    with pytest.raises(SystemExit):
        train.main(["--output-dir", str(tmp_path / "run"), "--resume"])
    assert error_line(capsys).startswith(f"error: {saved}: unknown key(s) ['los']")


def test_a_run_that_fails_before_its_first_checkpoint_leaves_nothing(train_tiny, tiny_dataset,
                                                                     tmp_path, capsys,
                                                                     monkeypatch):
    from rudder.training.trainer import Trainer

    empty = tmp_path / "empty"  # a dataset without any video features
    shutil.copytree(tiny_dataset, empty)
    shutil.rmtree(empty / "features")
    meta = json.loads((empty / "rudder.json").read_text())
    (empty / "rudder.json").write_text(json.dumps({**meta, "experts": {}}))
    with pytest.raises(SystemExit):
        train_tiny(tmp_path / "run", "--dataset", str(empty))
    assert "has no video features" in error_line(capsys)
    assert not (tmp_path / "run").exists()

    def crash(self):
        raise RuntimeError("killed during the first epoch")

    monkeypatch.setattr(Trainer, "fit", crash)
    with pytest.raises(RuntimeError, match="killed"):
        train_tiny(tmp_path / "run")
    assert not (tmp_path / "run").exists()
    monkeypatch.undo()
    train_tiny(tmp_path / "run", "--epochs", "1")  # the retry is not blocked
    assert (tmp_path / "run" / "metrics.json").is_file()


def test_resume_applies_and_records_a_new_epoch_count(train_tiny, tmp_path):
    train_tiny(tmp_path / "run", "--epochs", "1")
    result = train.main(["--output-dir", str(tmp_path / "run"), "--resume", "--epochs", "2"])
    assert result["epochs_run"] == 2 and epochs_logged(tmp_path / "run") == [1, 2]
    assert saved_config(tmp_path / "run")["epochs"] == 2
    # A plain --resume now continues the recorded config: nothing is left to train.
    again = train.main(["--output-dir", str(tmp_path / "run"), "--resume"])
    assert again["epochs_run"] == 2 and again["test"] == result["test"]


@pytest.mark.parametrize("flags", [["--set", "optim.lr=0.5"], ["--loss", "po"], ["--seed", "3"],
                                   ["--set", "data.batch_size=4"]])
def test_resume_refuses_flags_that_change_what_was_trained(train_tiny, tmp_path, capsys, flags):
    train_tiny(tmp_path / "run", "--epochs", "1")
    capsys.readouterr()
    before = (tmp_path / "run" / "config.yaml").read_text()
    with pytest.raises(SystemExit) as exit_info:
        train.main(["--output-dir", str(tmp_path / "run"), "--resume", "--epochs", "2", *flags])
    assert exit_info.value.code == 2
    line = error_line(capsys)
    assert f"cannot resume {tmp_path / 'run'} with" in line and "start a new run" in line
    assert (tmp_path / "run" / "config.yaml").read_text() == before
    assert epochs_logged(tmp_path / "run") == [1]


def test_resume_with_more_epochs_refuses_a_cosine_schedule(train_tiny, tmp_path, capsys):
    train_tiny(tmp_path / "run", "--epochs", "1", "--set", "optim.scheduler=cosine")
    capsys.readouterr()
    with pytest.raises(SystemExit):
        train.main(["--output-dir", str(tmp_path / "run"), "--resume", "--epochs", "2"])
    assert "optim.scheduler=cosine anneals over the 1 epochs" in error_line(capsys)


def test_seeds_resume_trains_new_seeds_with_the_saved_config(train_tiny, tmp_path):
    group = tmp_path / "seeds"
    train_tiny(group, "--epochs", "1", "--seeds", "0")
    summary = train.main(["--output-dir", str(group), "--seeds", "0", "1", "--resume"])
    assert summary["seeds"] == [0, 1]
    seed1 = saved_config(group / "seed-1")
    assert seed1["epochs"] == 1 and seed1["seed"] == 1 and seed1["model"]["shared_dim"] == 16
    assert epochs_logged(group / "seed-1") == [1]
    # More epochs: recorded for the group and every seed, and seed 0 continues too.
    train.main(["--output-dir", str(group), "--seeds", "0", "1", "--resume", "--epochs", "2"])
    assert saved_config(group)["epochs"] == 2
    for seed in (0, 1):
        assert saved_config(group / f"seed-{seed}")["epochs"] == 2
        assert epochs_logged(group / f"seed-{seed}") == [1, 2]


def test_seeds_under_torchrun_is_refused(tmp_path, capsys, monkeypatch):
    monkeypatch.setenv("WORLD_SIZE", "2")
    with pytest.raises(SystemExit):
        train.main(["--seeds", "0", "1", "--output-dir", str(tmp_path / "group")])
    assert "launch one torchrun per seed with --seed S" in error_line(capsys)
    assert not (tmp_path / "group").exists()


def test_seeds_runs_are_resumed_with_seeds(train_tiny, tmp_path, capsys):
    train_tiny(tmp_path / "seeds", "--epochs", "1", "--seeds", "0")
    capsys.readouterr()
    with pytest.raises(SystemExit):
        train.main(["--output-dir", str(tmp_path / "seeds"), "--resume"])
    assert "is a --seeds run; resume it with --seeds" in error_line(capsys)
    with pytest.raises(SystemExit):
        train_tiny(tmp_path / "seeds", "--seeds", "0", "--seed", "1")
    assert "--seed and --seeds cannot be combined" in error_line(capsys)


def test_empty_captions_are_rejected(train_tiny, tiny_dataset, tmp_path, capsys):
    data = tmp_path / "data"
    shutil.copytree(tiny_dataset, data)
    table = DatasetFolder(data).captions("train")
    captions = table.to_pylist()
    captions[3]["text"] = "   "
    replace_tables(data, "captions", {"train": pa.Table.from_pylist(captions, schema=table.schema)})
    with pytest.raises(SystemExit):
        train_tiny(tmp_path / "run", "--dataset", str(data))
    line = error_line(capsys)
    assert (f"caption {captions[3]['caption_id']!r}" in line
            and "is empty or whitespace only" in line)
    assert "captions/train.parquet" in line
    assert not (tmp_path / "run").exists()


def test_a_selection_the_dataset_cannot_score_stops_before_training(train_tiny, tiny_dataset,
                                                                    tmp_path, capsys):
    data = tmp_path / "data"
    shutil.copytree(tiny_dataset, data)
    folder = DatasetFolder(data)
    replace_tables(data, "captions", {
        split: folder.captions(split).drop_columns(["noun_classes", "verb_classes"])
        for split in ("train", "validation", "test")})
    with pytest.raises(SystemExit):
        train_tiny(tmp_path / "run", "--dataset", str(data), "--set", "selection=t2v.nDCG")
    assert "selection=t2v.nDCG needs noun/verb classes" in error_line(capsys)
    assert not (tmp_path / "run").exists()
