"""The training step never makes the host wait for the device: no value read
back, no data-dependent shape, no blocking copy, for every loss and supervision option.

On the CPU this is checked at the dispatcher (:class:`rudder.training.step_audit.StepAudit`); on a
CUDA machine the same steps also run under ``torch.cuda.set_sync_debug_mode("error")``.
"""

import contextlib

import pytest
import torch

from rudder import losses
from rudder.config import from_dict
from rudder.losses import LossInputError
from rudder.training.distributed import DistContext
from rudder.training.step_audit import StepAudit
from rudder.training.trainer import Trainer

from ..factories import tiny_config

DEVICES = ["cpu", pytest.param("cuda", marks=pytest.mark.skipif(
    not torch.cuda.is_available(), reason="needs a CUDA device"))]


def tiny_trainer(dataset, run_dir, device="cpu", loss="mm", **supervision):
    config = tiny_config(dataset, loss, data={"batch_size": 8}, supervision=supervision,
                         device=device)
    trainer = Trainer(config, run_dir, DistContext())
    trainer.model.train()
    return trainer


def audited_step(trainer, batch=8) -> StepAudit:
    """One warm-up step, then one audited step (on CUDA also under sync debug mode)."""
    videos, slots = torch.arange(batch), torch.zeros(batch, dtype=torch.long)
    trainer._step(videos, slots)
    cuda = trainer.device.type == "cuda"
    with StepAudit() as audit, (_cuda_sync_errors() if cuda else contextlib.nullcontext()):
        trainer._step(videos, slots)
    return audit


@contextlib.contextmanager
def _cuda_sync_errors():
    torch.cuda.synchronize()
    torch.cuda.set_sync_debug_mode("error")
    try:
        yield
    finally:
        torch.cuda.set_sync_debug_mode("default")


# -- the audit itself --------------------------------------------------------------------


@pytest.mark.parametrize("read", [
    lambda x: x.sum().item(),
    lambda x: bool(x.any()),
    lambda x: float(x[0]),
    lambda x: torch.nonzero(x),
    lambda x: x[x > 0],
    lambda x: x.masked_select(x > 0),
    lambda x: torch.unique(x),
    lambda x: x.to("meta"),  # a copy to another device that the host waits for
    lambda x: torch.repeat_interleave(x, torch.tensor([1, 2, 0])),  # output sized by the data
], ids=["item", "bool", "float", "nonzero", "mask-index", "masked_select", "unique", "copy",
        "repeat_interleave"])
def test_the_audit_sees_each_kind_of_host_wait(read):
    x = torch.tensor([1.0, -1.0, 2.0])
    with StepAudit() as audit:
        read(x)
    assert len(audit.waits) == 1, audit.waits
    assert "test_step_audit.py" in audit.waits[0]  # it names the line that asked


def test_the_audit_lets_device_side_work_through():
    x = torch.tensor([1.0, -1.0, 2.0])
    with StepAudit() as audit:
        torch.where(x > 0, x, 0.0).sum()
        x[torch.tensor([0, 2])]
        x.to("meta", non_blocking=True)
        torch.repeat_interleave(x, torch.tensor([1, 2, 0]), output_size=3)
    assert audit.waits == []
    assert audit.op_count >= 5


# -- the training step ---------------------------------------------------------------------


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("loss", losses.names())
def test_no_loss_makes_the_step_wait(loss, device, tiny_dataset, tmp_path):
    audit = audited_step(tiny_trainer(tiny_dataset, tmp_path, device, loss))
    assert audit.waits == []


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("supervision", [
    {"positive_sampling": "relevant"},
    {"batch_relevance": "video"},
], ids=["relevant-positives", "video-relevance"])
def test_supervision_options_keep_the_step_sync_free(supervision, device, tiny_dataset,
                                                     tmp_path):
    trainer = tiny_trainer(tiny_dataset, tmp_path, device, "relevance_margin", **supervision)
    assert audited_step(trainer).waits == []


@pytest.mark.parametrize("grad_clip", [None, 1.0])
def test_the_mixed_precision_bookkeeping_does_not_wait(grad_clip, tiny_dataset, tmp_path):
    """A CUDA run scales the loss (GradScaler), unscales, clips and steps the fused optimiser
    with the scale and inf flag on the device; the same Python path runs here with a CPU
    GradScaler, so a host read in it would show."""
    trainer = tiny_trainer(tiny_dataset, tmp_path)
    trainer.config.optim.grad_clip = grad_clip
    trainer.scaler = torch.amp.GradScaler("cpu")
    assert getattr(trainer.optimizer, "_step_supports_amp_scaling", False)  # fused by default
    assert audited_step(trainer).waits == []


@pytest.mark.slow  # loads the sample dataset (~8 s)
def test_manual_relations_and_descriptions_keep_the_step_sync_free(tmp_path):
    config = from_dict({"loss": {"name": "po"}, "model": {"shared_dim": 16}, "device": "cpu",
                        "supervision": {"manual_relations": True, "relation_batches": True,
                                        "description_labels": True}})
    trainer = Trainer(config, tmp_path, DistContext())
    trainer.model.train()
    assert audited_step(trainer, batch=16).waits == []


def test_the_trainer_turns_the_loss_value_checks_off_but_not_the_shape_checks(tiny_dataset,
                                                                              tmp_path):
    trainer = tiny_trainer(tiny_dataset, tmp_path)
    assert trainer.loss_fn.check_values is False
    bad = torch.tensor([[0.5, float("nan")], [0.1, 0.2]])
    assert torch.isnan(trainer.loss_fn(bad))  # the epoch's loss check reports it
    with pytest.raises(LossInputError, match="NaN"):
        losses.build("mm")(bad)  # a loss used directly still checks values
    with pytest.raises(LossInputError, match="square"):
        trainer.loss_fn(torch.zeros(2, 3))


def test_the_encoders_trace_as_one_graph_for_torch_compile(tiny_dataset, tmp_path):
    """No graph break in the encoders, so ``compile=reduce-overhead`` can capture them whole
    in a CUDA graph (a host read or data-dependent shape would split the graph)."""
    import torch._dynamo

    trainer = tiny_trainer(tiny_dataset, tmp_path)
    train = trainer.splits["train"]
    videos, slots = torch.arange(8), torch.zeros(8, dtype=torch.long)
    inputs = (*train.text_input(videos, slots), *train.video_batch(videos))
    torch._dynamo.reset()
    explained = torch._dynamo.explain(trainer.encoder)(*inputs)
    assert (explained.graph_count, explained.graph_break_count) == (1, 0), [
        str(reason.reason).splitlines()[0] for reason in explained.break_reasons]
