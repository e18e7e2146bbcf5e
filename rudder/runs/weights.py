"""Building networks: :func:`new_network`, the one call of :func:`rudder.models.build` (a
fresh model for training, the ``meta``-device builds of the checks below, a saved model), and
:func:`build_checked`, a saved model checked before anything is allocated, then built: the
one path by which a run checkpoint
(:meth:`rudder.runs.trained_model.TrainedModel.from_checkpoint`) and a published folder
(:func:`rudder.hub.published_models.rebuild`) become a model.

A saved model is a config (``model.*`` sizes), experts (``{name: {dim, variable_length}}``),
a vocabulary (tokens and n-gram buckets) and tensors (``model.safetensors``, or a
checkpoint's state dict). In order, each failure one :class:`RunError` naming the file and
the field:

1. every size is an integer (not a bool or a string) from 1 to its limit in
   :data:`LIMITS` (:data:`MAX_EXPERTS` experts, :data:`MAX_EXPERT_DIM`, :data:`MAX_TOKENS`,
   :data:`MAX_BUCKETS`, n-gram lengths up to :data:`MAX_NGRAM`);
2. the model these sizes describe is built on PyTorch's ``meta`` device (shapes and dtypes,
   no memory), and its state dict must have exactly the saved tensors' names, dtypes and
   shapes, read for safetensors from the file's header alone. So the real model takes the
   memory of the tensors on disk and no more. A field that disagrees with the tensors is
   named with the value they fit: among the fields whose change moves a mismatched tensor,
   the one that, set to a size found in the saved shapes or a small count, builds exactly
   the saved tensors (models built on ``meta`` again, on the error path only);
3. the saved tensors are finite (no NaN or infinity in any floating-point tensor).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from rudder.data.layout import ExpertInfo
from rudder.errors import RunError

if TYPE_CHECKING:
    import torch

    from rudder.config import TrainConfig
    from rudder.models import ModelConfig
    from rudder.text import Vocabulary

# The largest value a loaded model may have per config field (the reference's largest:
# shared_dim 768, 32 text clusters; these leave an order of magnitude above).
LIMITS = {
    "shared_dim": 16384,
    "word_dim": 16384,
    "text_input_dim": 16384,
    "text_vlad_clusters": 1024,
    "video_vlad_clusters": 1024,
    "vlad_ghost_clusters": 1024,
    "gating_g_layers": 32,
    "gating_hidden_layers": 32,
}
MAX_EXPERTS = 256
MAX_EXPERT_DIM = 65536  # features of one expert
MAX_TOKENS = 1 << 24  # vocabulary tokens (16.7 M)
MAX_BUCKETS = 1 << 24  # character n-gram buckets (fastText's default: 2 M)
MAX_NGRAM = 64  # characters of an n-gram (subwords.min_n, max_n)
# safetensors' dtype names of the torch dtypes a state dict holds
DTYPE_NAMES = {"float32": "F32", "float16": "F16", "bfloat16": "BF16", "float64": "F64",
               "int64": "I64", "int32": "I32", "int16": "I16", "int8": "I8", "uint8": "U8",
               "bool": "BOOL"}

Spec = tuple[str, tuple[int, ...]]  # (dtype name, shape) of one tensor


@dataclass(frozen=True)
class SavedFiles:
    """Where each part of a saved model was read from, as errors name it."""

    config: str
    experts: str
    vocabulary: str
    weights: str


def new_network(config: ModelConfig, experts: Mapping[str, ExpertInfo], table_size: int,
                initial_embeddings=None) -> torch.nn.Module:
    """A freshly initialised network of ``config`` over ``experts`` with ``table_size``
    token rows (the one call of :func:`rudder.models.build`)."""
    from rudder import models

    return models.build(config, experts, table_size, initial_embeddings)


# -- 1. sizes -----------------------------------------------------------------------------------
def is_count(value, low: int, high: int) -> bool:
    """Whether ``value`` is an int (not a bool) from ``low`` to ``high``."""
    return isinstance(value, int) and not isinstance(value, bool) and low <= value <= high


def check_config_sizes(config: TrainConfig, where: str) -> None:
    """Every ``model.*`` size of :data:`LIMITS` within its limit (the config's own rules
    have already refused a bool, a string, a float or a value under its minimum)."""
    for field, limit in LIMITS.items():
        value = getattr(config.model, field, None)
        if value is not None and value > limit:
            raise RunError(f"{where}: model.{field}={value!r} is over {limit}, the limit of a "
                           "loaded model")


def parse_experts(raw, where: str) -> dict[str, ExpertInfo]:
    """``{name: {dim, variable_length}}`` as :class:`ExpertInfo`, each value checked."""
    if not isinstance(raw, Mapping) or not raw:
        raise RunError(f"{where}: 'experts' must map expert names to {{dim, variable_length}}")
    if len(raw) > MAX_EXPERTS:
        raise RunError(f"{where}: {len(raw)} experts, over the limit of {MAX_EXPERTS}")
    experts = {}
    for name, info in raw.items():
        field = f"experts.{name}"
        if not isinstance(name, str) or not name or len(name) > 200:
            raise RunError(f"{where}: expert name {name!r} is not a name of 1 to 200 characters")
        if not isinstance(info, Mapping) or set(info) - {"dim", "variable_length"}:
            raise RunError(f"{where}: {field} must be {{dim, variable_length}}, got {info!r}")
        dim, variable = info.get("dim"), info.get("variable_length", False)
        if not isinstance(dim, int) or not is_count(dim, 1, MAX_EXPERT_DIM):
            raise RunError(f"{where}: {field}.dim={dim!r} is not an integer from 1 to "
                           f"{MAX_EXPERT_DIM}")
        if not isinstance(variable, bool):
            raise RunError(f"{where}: {field}.variable_length={variable!r} is not true or false")
        experts[name] = ExpertInfo(dim=dim, variable_length=variable)
    return experts


def parse_vocabulary(raw, where: str) -> Vocabulary:
    """A vocabulary's ``to_dict`` form, its sizes checked, as a Vocabulary."""
    from rudder.text.subwords import vocabulary_from_dict

    if not isinstance(raw, Mapping) or set(raw) - {"tokens", "subwords"}:
        raise RunError(f"{where}: 'vocabulary' must be {{tokens, subwords}}")
    tokens = raw.get("tokens")
    if not isinstance(tokens, list) or not all(isinstance(t, str) for t in tokens):
        raise RunError(f"{where}: vocabulary.tokens must be a list of strings")
    if len(tokens) > MAX_TOKENS:
        raise RunError(f"{where}: vocabulary.tokens has {len(tokens)} tokens, over the limit "
                       f"of {MAX_TOKENS}")
    subwords = raw.get("subwords")
    if subwords is not None:
        if not isinstance(subwords, Mapping) or set(subwords) != {"buckets", "min_n", "max_n"}:
            raise RunError(f"{where}: vocabulary.subwords must be {{buckets, min_n, max_n}}")
        for key, high in (("buckets", MAX_BUCKETS), ("min_n", MAX_NGRAM), ("max_n", MAX_NGRAM)):
            if not is_count(subwords[key], 1, high):
                raise RunError(f"{where}: vocabulary.subwords.{key}={subwords[key]!r} is not "
                               f"an integer from 1 to {high}")
        if subwords["min_n"] > subwords["max_n"]:
            raise RunError(f"{where}: vocabulary.subwords.min_n={subwords['min_n']} is over "
                           f"max_n={subwords['max_n']}")
    try:
        return vocabulary_from_dict(dict(raw))
    except (TypeError, ValueError) as error:
        raise RunError(f"{where}: 'vocabulary' is not valid ({error})") from None


# -- 2. shapes and dtypes -----------------------------------------------------------------------
def dtype_name(dtype) -> str:
    return DTYPE_NAMES.get(str(dtype).removeprefix("torch."), str(dtype))


def safetensors_specs(path: Path) -> dict[str, Spec]:
    """Name -> (dtype, shape) of each tensor of a safetensors file, from its header alone."""
    from safetensors import SafetensorError, safe_open

    try:
        with safe_open(str(path), framework="pt") as handle:
            return {name: (handle.get_slice(name).get_dtype(),
                           tuple(handle.get_slice(name).get_shape())) for name in handle.keys()}  # noqa: SIM118
    except (SafetensorError, OSError, ValueError) as error:
        raise RunError(f"{path}: cannot be read ({' '.join(str(error).split())[:300]})"
                       ) from None


def state_specs(state, where: str) -> dict[str, Spec]:
    """Name -> (dtype, shape) of each tensor of a loaded state dict."""
    import torch

    if not isinstance(state, Mapping) or not all(
            isinstance(k, str) and isinstance(v, torch.Tensor) for k, v in state.items()):
        raise RunError(f"{where}: the model's state is not a mapping of names to tensors")
    return {name: (dtype_name(t.dtype), tuple(t.shape)) for name, t in state.items()}


def expected_specs(config: TrainConfig, experts: Mapping, table_size: int) -> dict[str, Spec]:
    """Name -> (dtype, shape) of the state dict of the model these sizes build, from a build
    on the ``meta`` device (no memory)."""
    import torch

    with torch.device("meta"):
        model = new_network(config.model, experts, table_size)
    return {name: (dtype_name(t.dtype), tuple(t.shape)) for name, t in model.state_dict().items()}


def check_specs(saved: dict[str, Spec], config: TrainConfig, experts: Mapping,
                vocab: Vocabulary, files: SavedFiles) -> None:
    """Refuse saved tensors whose names, dtypes or shapes differ from the model's."""
    from rudder.errors import ConfigError

    table_size = vocab.table_size
    try:
        expected = expected_specs(config, experts, table_size)
    except (ConfigError, TypeError, ValueError) as error:
        raise RunError(f"{files.config}: the model cannot be built ({error})") from None
    wrong = sorted(name for name in expected.keys() | saved.keys()
                   if expected.get(name) != saved.get(name))
    if not wrong:
        return
    first = wrong[0]
    have, want = saved.get(first), expected.get(first)
    if have and want and have[1] == want[1]:
        raise RunError(f"{files.weights}: tensor {first!r} is {have[0]}, the model holds "
                       f"{want[0]} (a relabelled dtype changes results); publish or train it "
                       "again")
    shown = (f"tensor {first!r}: the file has {_spec_text(have)}, the model "
             f"{_spec_text(want)}{f'; {len(wrong)} tensors differ' if len(wrong) > 1 else ''}")
    knobs = [k for k in _knobs(config, experts, vocab.table_size, files)
             if k.moves(wrong, expected)]
    for knob in knobs:
        fit = knob.fitting(saved)
        if fit is not None:
            raise RunError(f"{knob.file}: {knob.field}={knob.value!r} does not match "
                           f"{files.weights}, whose tensors fit {knob.field}={fit!r} ({shown})")
    involved = ", ".join(f"{k.field}={k.value!r}" for k in knobs) or "none alone"
    raise RunError(f"{files.weights} does not fit the model that {files.config}, "
                   f"{files.experts} and {files.vocabulary} describe ({shown}; fields "
                   f"involved: {involved})")


def _spec_text(spec: Spec | None) -> str:
    return "no such tensor" if spec is None else f"{spec[0]} {list(spec[1])}"


@dataclass(frozen=True)
class _Knob:
    """One size or switch of a saved model, and the specs of the model with it changed."""

    file: str
    field: str
    value: int | bool
    limit: int
    specs_with: Callable[[int | bool], dict[str, Spec]]

    def _specs(self, value) -> dict[str, Spec] | None:
        from rudder.errors import ConfigError

        try:
            return self.specs_with(value)
        except (ConfigError, TypeError, ValueError, RuntimeError):
            return None  # a value the model refuses

    def moves(self, wrong: list[str], expected: dict[str, Spec]) -> bool:
        """Whether a step of this field (either way) changes a mismatched tensor."""
        steps = [not self.value] if isinstance(self.value, bool) else [self.value - 1,
                                                                         self.value + 1]
        for step in steps:
            other = self._specs(step)
            if other is not None and any(expected.get(n) != other.get(n) for n in wrong):
                return True
        return False

    def fitting(self, saved: dict[str, Spec]) -> int | bool | None:
        """The value of this field whose model has exactly the ``saved`` specs, among the
        sizes found in the saved shapes and the small counts (None: no value fits)."""
        if isinstance(self.value, bool):
            candidates: list = [not self.value]
        else:
            sizes = {size for _, shape in saved.values() for size in shape}
            candidates = sorted(v for v in sizes | set(range(33))
                                if 0 <= v <= self.limit and v != self.value)
        return next((v for v in candidates if self._specs(v) == saved), None)


def _knobs(config: TrainConfig, experts: Mapping, table_size: int,
           files: SavedFiles) -> list[_Knob]:
    """Every integer size and switch of the model config, the experts and the vocabulary."""
    knobs = []
    for field in dataclasses.fields(config.model):
        value = getattr(config.model, field.name)
        if isinstance(value, (bool, int)):
            def specs_with(new, name=field.name):
                changed: dict = {name: new}
                model = dataclasses.replace(config.model, **changed)
                return expected_specs(dataclasses.replace(config, model=model), experts,
                                      table_size)

            knobs.append(_Knob(files.config, f"model.{field.name}", value,
                               LIMITS.get(field.name, MAX_EXPERT_DIM), specs_with))
    for name, info in experts.items():
        for key in ("dim", "variable_length"):
            def expert_with(new, name=name, key=key, info=info):
                changed: dict = {key: new}
                return expected_specs(config, {**experts, name: dataclasses.replace(
                    info, **changed)}, table_size)

            knobs.append(_Knob(files.experts, f"experts.{name}.{key}", getattr(info, key),
                               MAX_EXPERT_DIM, expert_with))
    knobs.append(_Knob(files.vocabulary, "len(vocabulary.tokens) + vocabulary.subwords.buckets",
                       table_size, MAX_TOKENS + MAX_BUCKETS,
                       lambda new: expected_specs(config, experts, new)))
    return knobs


# -- 3. values ----------------------------------------------------------------------------------
def check_finite(tensors: Mapping, where: str) -> None:
    """Refuse a floating-point tensor with a NaN or infinite value, naming it."""
    import torch

    for name, tensor in tensors.items():
        if tensor.is_floating_point() and not bool(torch.isfinite(tensor).all()):
            bad = int((~torch.isfinite(tensor)).sum())
            raise RunError(f"{where}: tensor {name!r} holds {bad} NaN or infinite value"
                           f"{'s' if bad > 1 else ''} of {tensor.numel()}; the model cannot be "
                           "used (train it again, or publish a checkpoint from before the "
                           "divergence)")


# -- the one loading path ------------------------------------------------------------------------
def build_checked(config: TrainConfig, experts: dict[str, ExpertInfo], vocab: Vocabulary,
                  weights, files: SavedFiles, device: str = "cpu") -> torch.nn.Module:
    """The model of a saved ``config``, ``experts`` and ``vocab`` with ``weights`` (a path to
    a safetensors file, or a loaded state dict) in eval mode on ``device``, after the checks
    of the module docstring; nothing is allocated for the model before they pass."""
    check_config_sizes(config, files.config)
    if isinstance(weights, (str, Path)):
        saved = safetensors_specs(Path(weights))
    else:
        saved = state_specs(weights, files.weights)
    check_specs(saved, config, experts, vocab, files)
    if isinstance(weights, (str, Path)):
        from safetensors import SafetensorError
        from safetensors.torch import load_file

        try:
            weights = load_file(weights, device=str(device))
        except (SafetensorError, OSError) as error:
            raise RunError(f"{files.weights}: cannot be read ({error})") from None
    check_finite(weights, files.weights)
    model = new_network(config.model, experts, vocab.table_size)
    model.load_state_dict(weights)
    return model.to(device).eval()

