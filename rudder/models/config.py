"""``ModelConfig``: which model (``name``) and the sizes and switches of
:class:`rudder.models.CollaborativeExperts`, the default model.

Defaults are sized for fast CPU training on the embedded sample dataset. The values of the
reference implementation (albanie/collaborative-experts, MSR-VTT) are quoted per field:
the BMVC 2019 release (``configs/msrvtt/train-full-ce.json``) and the later refined
release (``configs/data_loader_msrvtt.json`` on top of ``configs/base_config.json``).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import asdict, dataclass, fields

ACTIVATIONS = ("relu", "mish")


@dataclass
class ModelConfig:
    """Collaborative Experts hyper-parameters (validated when created).

    Attributes:
        name: the model, a key of :data:`rudder.models.MODELS` (``"ce"``: Collaborative
            Experts); another model reads the fields below that apply to it.
        shared_dim: D, the size of every per-expert embedding (``ce_shared_dim``;
            reference 512 in the BMVC release, 768 in the refined release).
        word_dim: size of the trainable word embeddings (rudder trains its own from the
            vocabulary; the reference feeds 300-d word2vec or 768-d GPT features).
        text_vlad_clusters: NetVLAD clusters over words (reference MSR-VTT: 32 in the
            BMVC release, 28 in the refined release).
        video_vlad_clusters: NetVLAD clusters over the frames of each variable-length
            expert (reference MSR-VTT audio: 16 in the BMVC release, 8 in the refined one).
        vlad_ghost_clusters: ghost clusters of every NetVLAD (Zhong et al. 2018; they take
            soft-assignment mass and are dropped from the output; reference refined
            MSR-VTT: 1, BMVC release: 0). The reference code gives them to the text NetVLAD
            only (its config also lists audio ghosts, which its ``CENet`` ignores); here the
            video NetVLADs get them too.
        gating_g_layers: layers of the pair network g (reference ``num_g_layers``): the
            first is Linear(2D -> D) on [psi_i, psi_j]; each further one is
            [BatchNorm if use_batchnorm] -> activation -> Linear(D -> D). Reference
            refined MSR-VTT: 3 (with Mish); the default 1 keeps g linear and cheap.
        gating_hidden_layers: layers of h applied to the averaged mask (reference
            ``num_h_layers``; MSR-VTT: 0), each [BatchNorm?] -> activation -> Linear.
        gating_activation: activation of the extra g and h layers, ``"relu"`` or
            ``"mish"`` (reference ``use_mish=1``).
        include_self: whether the pair (i, i) takes part in expert i's mask (reference
            ``include_self=1``).
        use_batchnorm: BatchNorm in the context gating of the text gated embedding units,
            the video collaborative gating, the extra g/h layers and the NetVLAD
            assignments, as the reference (True); False removes every BatchNorm.
        dropout: dropout probability on the pooled text vector and on each video
            expert's input to its reduction (not in the reference; 0 disables it).
        freeze_embeddings: keep the word embeddings fixed (no gradient).
        text_input_dim: when set, ``encode_text`` takes precomputed token features
            (B, L, text_input_dim) floats (e.g. from a sentence encoder) instead of
            token ids, and the model has no word embedding table.
    """

    name: str = "ce"
    shared_dim: int = 256
    word_dim: int = 64
    text_vlad_clusters: int = 16
    video_vlad_clusters: int = 8
    vlad_ghost_clusters: int = 0
    gating_g_layers: int = 1
    gating_hidden_layers: int = 0
    gating_activation: str = "relu"
    include_self: bool = True
    use_batchnorm: bool = True
    dropout: float = 0.0
    freeze_embeddings: bool = False
    text_input_dim: int | None = None

    def __post_init__(self) -> None:
        for name, low in (
            ("shared_dim", 1),
            ("word_dim", 1),
            ("text_vlad_clusters", 1),
            ("video_vlad_clusters", 1),
            ("vlad_ghost_clusters", 0),
            ("gating_g_layers", 1),
            ("gating_hidden_layers", 0),
        ):
            _check_int(name, getattr(self, name), low)
        if self.text_input_dim is not None:
            _check_int("text_input_dim", self.text_input_dim, 1)
        for name in ("include_self", "use_batchnorm", "freeze_embeddings"):
            if not isinstance(getattr(self, name), bool):
                raise ValueError(  # noqa: TRY004 - every bad config value is a ValueError
                    f"model.{name}: expected true or false, got {getattr(self, name)!r}"
                )
        if not isinstance(self.name, str):
            raise ValueError(f"model.name: expected a string, got {self.name!r}")  # noqa: TRY004
        if self.gating_activation not in ACTIVATIONS:
            raise ValueError(
                f"model.gating_activation: {self.gating_activation!r} is not one of {ACTIVATIONS}"
            )
        if isinstance(self.dropout, bool) or not isinstance(self.dropout, (int, float)):
            raise ValueError(  # noqa: TRY004 - every bad config value is a ValueError
                f"model.dropout: expected a number in [0, 1), got {self.dropout!r}"
            )
        if not 0.0 <= self.dropout < 1.0:
            raise ValueError(f"model.dropout: expected a number in [0, 1), got {self.dropout}")

    @classmethod
    def from_dict(cls, data: Mapping, where: str = "model") -> ModelConfig:
        """Build from a mapping (e.g. a YAML section); unknown keys are an error."""
        valid = [f.name for f in fields(cls)]
        unknown = sorted(set(data) - set(valid))
        if unknown:
            raise ValueError(f"{where}: unknown field(s) {unknown}; valid fields: {valid}")
        return cls(**data)

    def to_dict(self) -> dict:
        """The fields as a plain dict (for YAML and checkpoints)."""
        return asdict(self)


def _check_int(name: str, value, low: int) -> None:
    if isinstance(value, bool) or not isinstance(value, int) or value < low:
        raise ValueError(f"model.{name}: expected an integer >= {low}, got {value!r}")
