"""Two CPU processes under torchrun (gloo, DistributedDataParallel) train exactly like one
process on the same global batches; on a GPU machine the test still runs both on the CPU.
BatchNorm is off: its statistics are per process (SyncBatchNorm is CUDA-only)."""

import json
import logging
import os
import subprocess
import sys

import pytest
import torch
import torch.distributed as dist

from rudder import train
from rudder.training.distributed import (
    DistContext,
    DistributedSetupError,
    init_distributed,
    shard_sizes,
)

# SGD, not Adam: Adam is blind to a constant gradient factor, the mark of the classic DDP bugs
# (gradients summed instead of averaged, other processes' embeddings gathered detached).
NO_BN = ["--set", "model.use_batchnorm=false", "--epochs", "2", "--device", "cpu",
         "--set", "optim.name=sgd", "--set", "optim.lr=0.1"]

DROPOUT_MASKS = """
import sys
import torch
import torch.distributed as dist
from rudder.config import from_dict
from rudder.training.distributed import init_distributed
from rudder.training.trainer import Trainer

dataset, out = sys.argv[1], sys.argv[2]
config = from_dict({"device": "cpu", "epochs": 1, "model": {"dropout": 0.5, "shared_dim": 16,
                    "word_dim": 8}, "data": {"dataset": dataset, "batch_size": 8,
                    "caption_langs": ["mr", "en"], "audio_langs": ["mr"]}})
ctx = init_distributed(torch.device("cpu"))
trainer = Trainer(config, f"{out}/run", ctx)
masks = []
trainer.model.dropout.register_forward_hook(lambda m, i, o: masks.append(o == 0))
trainer.fit()
gathered = [None] * ctx.world_size
dist.all_gather_object(gathered, masks[0])
if ctx.rank == 0:
    print("same masks" if torch.equal(gathered[0], gathered[1]) else "own masks")
dist.barrier()
dist.destroy_process_group()
"""


def test_more_processes_than_gpus_names_the_fix(monkeypatch):
    monkeypatch.setenv("WORLD_SIZE", "2")
    monkeypatch.setenv("LOCAL_WORLD_SIZE", "2")
    monkeypatch.setenv("LOCAL_RANK", "1")
    monkeypatch.setattr(torch.cuda, "device_count", lambda: 1)
    with pytest.raises(DistributedSetupError,
                       match=r"--nproc_per_node=1, or train on the CPU with --device cpu"):
        init_distributed(torch.device("cuda"))


@pytest.mark.parametrize("total", [0, 1, 7, 8, 9, 64])
@pytest.mark.parametrize("world", [1, 2, 3])
def test_every_host_knows_the_share_sizes_without_asking(total, world):
    """gather_with_grad exchanges no sizes: each host computes what shard() gives each rank."""
    shares = torch.tensor_split(torch.arange(total), world)
    assert shard_sizes(total, DistContext(0, world, 0)) == [len(s) for s in shares]


@pytest.mark.slow
@pytest.mark.skipif(not dist.is_available() or not dist.is_gloo_available(),
                    reason="this torch build has no gloo backend for CPU processes")
def test_two_processes_match_one(tiny_dataset, tmp_path, fast_args):
    single = train.main(["--dataset", str(tiny_dataset), "--output-dir", str(tmp_path / "one"),
                         *fast_args, *NO_BN])
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    command = [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc_per_node=2",
               "-m", "rudder.train", "--dataset", str(tiny_dataset),
               "--output-dir", str(tmp_path / "two"), *fast_args, *NO_BN]
    done = subprocess.run(command, env=env, capture_output=True, text=True, timeout=300,
                          check=False)
    assert done.returncode == 0, done.stderr[-3000:]
    one_lines = [json.loads(x)
                 for x in (tmp_path / "one" / "metrics.jsonl").read_text().splitlines()]
    two_lines = [json.loads(x)
                 for x in (tmp_path / "two" / "metrics.jsonl").read_text().splitlines()]
    assert [x["epoch"] for x in two_lines] == [1, 2]  # only rank 0 writes
    for a, b in zip(one_lines, two_lines, strict=False):
        assert b["train_loss"] == pytest.approx(a["train_loss"], rel=1e-4, abs=1e-6)
    two = json.loads((tmp_path / "two" / "metrics.json").read_text())
    for key in ("R1", "R5", "R10", "MdR", "MnR"):
        assert two["test"]["t2v"][key] == pytest.approx(single["test"]["t2v"][key], abs=1e-6)


@pytest.mark.slow
@pytest.mark.skipif(not dist.is_available() or not dist.is_gloo_available(),
                    reason="this torch build has no gloo backend for CPU processes")
def test_each_process_draws_its_own_dropout(tiny_dataset, tmp_path):
    script = tmp_path / "masks.py"
    script.write_text(DROPOUT_MASKS, encoding="utf-8")
    command = [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc_per_node=2",
               str(script), str(tiny_dataset), str(tmp_path)]
    done = subprocess.run(command, env={**os.environ, "OMP_NUM_THREADS": "1"},
                          capture_output=True, text=True, timeout=300, check=False)
    assert done.returncode == 0, done.stderr[-3000:]
    assert "own masks" in done.stdout


def test_a_failing_compilation_falls_back_to_eager(monkeypatch, caplog):
    from rudder.training.distributed import CompiledOrEager

    def broken(*args):
        raise RuntimeError("inductor: no C++ compiler")

    module = torch.nn.Linear(2, 1)
    monkeypatch.setattr(torch, "compile", lambda module, mode: broken)
    wrapped = CompiledOrEager(module, "default")
    x = torch.ones(1, 2)
    logger = logging.getLogger("rudder.train")  # a training run may have stopped propagation
    logger.addHandler(caplog.handler)
    try:
        assert torch.equal(wrapped(x), module(x))
    finally:
        logger.removeHandler(caplog.handler)
    assert "training continues without it" in caplog.text and wrapped.compiled is None
    assert torch.equal(wrapped(x), module(x))  # later calls go straight to eager


@pytest.mark.slow
def test_compiled_training_matches_eager(tiny_dataset, tmp_path, fast_args):
    eager = train.main(["--dataset", str(tiny_dataset), "--output-dir", str(tmp_path / "eager"),
                        *fast_args, "--device", "cpu", "--epochs", "1"])
    compiled = train.main(["--dataset", str(tiny_dataset),
                           "--output-dir", str(tmp_path / "compiled"), *fast_args,
                           "--device", "cpu", "--epochs", "1", "--set", "compile=default"])
    assert "failed" not in (tmp_path / "compiled" / "train.log").read_text()
    for key in ("R1", "R10", "MdR"):
        assert compiled["test"]["t2v"][key] == pytest.approx(eager["test"]["t2v"][key], abs=5.0)


def _gather_worker(rank, world, init_file, total, results):
    from rudder.training.distributed import DistContext, gather_with_grad, shard

    dist.init_process_group("gloo", init_method=f"file://{init_file}", rank=rank,
                            world_size=world)
    try:
        full = torch.arange(total * 6, dtype=torch.float32).reshape(total, 2, 3)
        flags = torch.arange(total) % 3 == 0
        ctx = DistContext(rank, world, rank)
        local = shard(torch.arange(total), ctx)
        mine = full[local].clone().requires_grad_()
        values, gathered_flags = gather_with_grad([mine, flags[local]], ctx, total)
        (values * full).sum().backward()  # every process computes the same loss
        results[rank] = (torch.equal(values.detach(), full), torch.equal(gathered_flags, flags),
                         torch.allclose(mine.grad, world * full[local]))
        dist.barrier()
    finally:
        dist.destroy_process_group()


@pytest.mark.skipif(not dist.is_available() or not dist.is_gloo_available(),
                    reason="this torch build has no gloo backend for CPU processes")
def test_one_packed_gather_returns_uneven_shares_with_their_gradients(tmp_path):
    import torch.multiprocessing as mp

    results = mp.Manager().dict()
    mp.spawn(_gather_worker, args=(2, tmp_path / "init", 5, results), nprocs=2)
    # shares of 3 and 2 rows; a bool tensor comes back as bool; the gather's backward sums
    # the world's gradients for each process's rows (module docstring of
    # rudder.training.distributed)
    assert dict(results) == {0: (True, True, True), 1: (True, True, True)}
