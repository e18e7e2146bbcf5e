"""What in a piece of torch code would make a CUDA host wait for the GPU, found on any device.

A CUDA step runs ahead of the GPU only while the host never needs a result: reading a value
(``.item()``, ``bool(t)``, ``float(t)``), an op whose output shape depends on the data
(``nonzero``, boolean-mask indexing, ``masked_select``, ``unique``, ...) or a blocking
host-to-device copy each wait until every queued kernel has run (the ops that
``torch.cuda.set_sync_debug_mode`` reports). :class:`StepAudit` records these at the
dispatcher, where they look the same on every device, so the CPU test suite checks the
property that matters on a GPU. What dispatches nothing on the CPU stays unseen there: a
``.tolist()``, ``.numpy()`` or ``.cpu()`` that would copy a CUDA tensor to the host is a no-op
on a CPU tensor; on CUDA, ``set_sync_debug_mode("error")`` is the second check that catches
those too (``tests/training/test_step_audit.py``). It also counts the dispatched ops: on a GPU
nearly each is a kernel launch, so the count is the step's launch cost
(``benchmarks/bench_step.py``).
"""

from __future__ import annotations

import traceback
from collections import Counter

import torch
from torch.utils._python_dispatch import TorchDispatchMode

aten = torch.ops.aten

# ops whose result the host reads: a value, or an output size that depends on the data
HOST_READS = {
    aten._local_scalar_dense.default,
    aten.nonzero.default,
    aten.masked_select.default,
    aten._unique.default,
    aten._unique2.default,
    aten.unique_dim.default,
    aten.unique_consecutive.default,
    aten.is_nonzero.default,
    aten.equal.default,
    aten.bincount.default,
}
# ops that read a boolean mask index on the host (they run ``nonzero`` on it)
MASK_INDEXING = {aten.index.Tensor, aten.index_put.default, aten.index_put_.default,
                 aten._index_put_impl_.default}


def _bool_indexed(func, args) -> bool:
    return func in MASK_INDEXING and any(
        isinstance(i, torch.Tensor) and i.dtype == torch.bool for i in args[1])


def _sized_by_data(func, kwargs) -> bool:
    """``repeat_interleave`` with tensor repeats and no ``output_size``: the host reads the
    repeats' sum to size the output."""
    return func is aten.repeat_interleave.Tensor and kwargs.get("output_size") is None


def _blocking_copy(func, args, kwargs) -> bool:
    """A copy between devices that the host waits for (``non_blocking`` unset)."""
    if func is aten._to_copy.default:
        target = kwargs.get("device")
        return (target is not None and torch.device(target) != args[0].device
                and not kwargs.get("non_blocking", False))
    if func is aten.copy_.default:
        non_blocking = args[2] if len(args) > 2 else kwargs.get("non_blocking", False)
        return args[0].device != args[1].device and not non_blocking
    return False


def _caller() -> str:
    """The innermost frame outside torch: where the op was asked for."""
    for frame in reversed(traceback.extract_stack()):
        if "/torch/" not in frame.filename and frame.filename != __file__:
            return f"{frame.filename}:{frame.lineno} ({frame.line})"
    return "?"


class StepAudit(TorchDispatchMode):
    """``with StepAudit() as audit: step()``; then ``audit.waits`` lists each host wait as
    ``"op at file:line (source)"`` and ``audit.ops`` counts every dispatched op."""

    def __init__(self):
        super().__init__()
        self.ops: Counter = Counter()
        self.waits: list[str] = []

    @property
    def op_count(self) -> int:
        return sum(self.ops.values())

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        self.ops[func] += 1
        if func in HOST_READS:
            self.waits.append(f"{func} at {_caller()}")
        elif _bool_indexed(func, args):
            self.waits.append(f"{func} with a boolean mask at {_caller()}")
        elif _sized_by_data(func, kwargs):
            self.waits.append(f"{func} without output_size at {_caller()}")
        elif _blocking_copy(func, args, kwargs):
            self.waits.append(f"blocking copy {func} at {_caller()}")
        return func(*args, **kwargs)
