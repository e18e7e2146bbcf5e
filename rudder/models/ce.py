"""Collaborative Experts (Liu et al., BMVC 2019) for text-video retrieval with missing experts.

Structure follows ``CENet``/``CEModule`` of albanie/collaborative-experts ``model/model.py``
in its MSR-VTT configuration (``use_ce="pairwise"``, ``include_self=1``,
``num_h_layers=0``); every departure is stated where it happens (netvlad.py, gating.py,
config.py and below).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from rudder.models.config import ModelConfig
from rudder.models.gating import CollaborativeGating, GatedEmbeddingUnit
from rudder.models.netvlad import NetVLAD


class CollaborativeExperts(nn.Module):
    """Text and video encoders into E per-expert spaces, plus the mixture-weighted similarity.

    Args:
        config: the :class:`ModelConfig`.
        experts: expert name -> info with ``.dim`` (D_e) and ``.variable_length``
            (``rudder.data.layout.ExpertInfo``). Experts are ordered by sorted name
            (``self.experts``); ``available`` columns follow that order.
        vocab_size: rows of the word embedding table (``Vocabulary.table_size``: the
            tokens, PAD = 0, plus any character n-gram buckets); unused (may be None) when
            ``config.text_input_dim`` is set.

    Video side, per expert e: fixed-size features (B, D_e), or variable-length ones
    (B, T, D_e) pooled by a masked NetVLAD, go through Linear(-> D) and L2 (psi_e, the
    reference ``ReduceDim``), then :class:`CollaborativeGating`. Text side: word
    embeddings (or given token features) -> masked NetVLAD -> one
    :class:`GatedEmbeddingUnit` per expert; mixture logits = Linear(NetVLAD output -> E)
    (reference ``moe_fc``). Features of unavailable experts are replaced by zeros before
    use, so whatever they hold (even NaN) never reaches the output.
    """

    def __init__(self, config: ModelConfig, experts: Mapping, vocab_size: int | None):
        super().__init__()
        if not isinstance(config, ModelConfig):
            raise TypeError(f"config must be a ModelConfig, got {type(config).__name__}")
        if not experts:
            raise ValueError("CollaborativeExperts needs at least one expert")
        self.config = config
        # Value checks (token ids in range, every video with an available expert and
        # frames) read tensors back to the host, which stalls a GPU step; a caller whose
        # data were validated when loaded (the Trainer) may turn them off.
        self.check_values = True
        self.experts = sorted(experts)
        self.expert_info = {name: experts[name] for name in self.experts}
        for name, info in self.expert_info.items():
            dim = getattr(info, "dim", None)
            if isinstance(dim, bool) or not isinstance(dim, int) or dim < 1:
                raise ValueError(f"expert {name!r}: dim must be a positive integer, got {dim!r}")
        dim = config.shared_dim
        self.dropout = nn.Dropout(config.dropout)

        self.video_pooling = nn.ModuleList()
        self.video_reduce = nn.ModuleList()
        for name in self.experts:
            info = self.expert_info[name]
            if info.variable_length:
                pool = NetVLAD(info.dim, config.video_vlad_clusters, config.vlad_ghost_clusters,
                               config.use_batchnorm)
                self.video_pooling.append(pool)
                self.video_reduce.append(nn.Linear(pool.out_dim, dim))
            else:
                self.video_pooling.append(nn.Identity())
                self.video_reduce.append(nn.Linear(info.dim, dim))
        self.gating = CollaborativeGating(
            num_experts=len(self.experts),
            dim=dim,
            g_layers=config.gating_g_layers,
            h_layers=config.gating_hidden_layers,
            include_self=config.include_self,
            use_batchnorm=config.use_batchnorm,
            activation=config.gating_activation,
        )

        if config.text_input_dim is None:
            if isinstance(vocab_size, bool) or not isinstance(vocab_size, int) or vocab_size < 2:
                raise ValueError(
                    f"vocab_size must be an integer >= 2 (PAD and UNK at least), got {vocab_size!r}"
                )
            self.word_embedding: nn.Embedding | None = nn.Embedding(
                vocab_size, config.word_dim, padding_idx=0
            )
            self.word_embedding.weight.requires_grad_(not config.freeze_embeddings)
            text_feature_dim = config.word_dim
        else:
            self.word_embedding = None
            text_feature_dim = config.text_input_dim
        self.text_pooling = NetVLAD(
            text_feature_dim, config.text_vlad_clusters, config.vlad_ghost_clusters,
            config.use_batchnorm,
        )
        self.text_units = nn.ModuleList(
            GatedEmbeddingUnit(self.text_pooling.out_dim, dim, config.use_batchnorm)
            for _ in self.experts
        )
        self.mixture = nn.Linear(self.text_pooling.out_dim, len(self.experts))

    def init_word_embeddings(self, vectors: Tensor) -> None:
        """Copy pretrained word vectors ``(vocab_size, word_dim)`` into the word embeddings."""
        if self.word_embedding is None:
            raise ValueError(
                "init_word_embeddings: this model reads token features (model.text_input_dim)"
            )
        with torch.no_grad():
            self.word_embedding.weight.copy_(vectors)

    # ------------------------------------------------------------------ text
    def encode_text(self, tokens: Tensor, mask: Tensor) -> tuple[Tensor, Tensor]:
        """Token ids (B, L) long, subword rows (B, L, G) long (:mod:`rudder.text.subwords`;
        a word is the mean of its non-PAD rows), or features (B, L, text_input_dim), and mask
        (B, L) bool -> (per-expert unit-norm embeddings (B, E, D), mixture logits (B, E))."""
        words = self._word_features(tokens, mask)
        pooled = self.dropout(self.text_pooling(words, mask))
        embeddings = torch.stack([unit(pooled) for unit in self.text_units], dim=1)
        return embeddings, self.mixture(pooled)

    def _word_features(self, tokens: Tensor, mask: Tensor) -> Tensor:
        if self.word_embedding is None:
            want = self.config.text_input_dim
            if not tokens.is_floating_point() or tokens.dim() != 3 or tokens.shape[-1] != want:
                raise ValueError(
                    f"encode_text: model.text_input_dim={want}, so expected float token "
                    f"features (B, L, {want}), got {tokens.dtype} {tuple(tokens.shape)}"
                )
            words = tokens.to(self.text_pooling.assign_weight.dtype)
        else:
            if tokens.dtype != torch.long or tokens.dim() not in (2, 3):
                raise ValueError(
                    "encode_text: expected token ids (B, L) or subword rows (B, L, G) int64, "
                    f"got {tokens.dtype} {tuple(tokens.shape)} "
                    "(set model.text_input_dim for token features)"
                )
            vocab_size = self.word_embedding.num_embeddings
            if self.check_values and tokens.numel() and (tokens.min() < 0
                                                         or tokens.max() >= vocab_size):
                raise ValueError(
                    f"encode_text: token ids must lie in [0, {vocab_size}); got "
                    f"[{int(tokens.min())}, {int(tokens.max())}] (vocabulary/model mismatch?)"
                )
            words = self.word_embedding(tokens)
            if tokens.dim() == 3:  # fastText: the mean of a word's row and its n-gram rows
                present = (tokens != 0).unsqueeze(-1).to(words.dtype)
                words = (words * present).sum(dim=2) / present.sum(dim=2).clamp_min(1.0)
        if mask.dtype != torch.bool or mask.shape != words.shape[:2]:
            raise ValueError(
                f"encode_text: expected a bool mask of shape {tuple(words.shape[:2])}, "
                f"got {mask.dtype} {tuple(mask.shape)}"
            )
        return words

    # ----------------------------------------------------------------- video
    def encode_video(
        self, features: Mapping[str, Tensor], frame_masks: Mapping[str, Tensor], available: Tensor
    ) -> Tensor:
        """Per-expert video embeddings (B, E, D): unit rows where available, zero rows elsewhere.

        ``features[e]`` is (B, D_e) for fixed-size experts and (B, T, D_e) for
        variable-length ones, whose ``frame_masks[e]`` (B, T) bool is True on real frames.
        ``available`` (B, E) bool follows ``self.experts``; every video needs at least
        one available expert.
        """
        available = self._check_available(features, available)
        psi = []
        for i, name in enumerate(self.experts):
            x = self._expert_input(i, features[name], frame_masks, available[:, i])
            psi.append(F.normalize(self.video_reduce[i](self.dropout(x)), dim=-1))
        return self.gating(torch.stack(psi, dim=1), available)

    def _check_available(self, features: Mapping[str, Tensor], available: Tensor) -> Tensor:
        missing = [name for name in self.experts if name not in features]
        extra = sorted(set(features) - set(self.experts))
        if missing or extra:
            raise ValueError(
                f"encode_video: features must hold exactly the model's experts {self.experts}; "
                f"missing {missing}, unexpected {extra}"
            )
        if (
            available.dtype != torch.bool
            or available.dim() != 2
            or available.shape[1] != len(self.experts)
        ):
            raise ValueError(
                f"encode_video: expected available as bool (B, {len(self.experts)}) in the "
                f"order {self.experts}, got {available.dtype} {tuple(available.shape)}"
            )
        if not self.check_values:
            return available
        empty = (~available.any(dim=1)).nonzero().flatten().tolist()
        if empty:
            raise ValueError(
                f"encode_video: batch rows {empty[:10]} have no available expert; "
                "drop such videos before encoding (there is nothing to embed)"
            )
        return available

    def _expert_input(
        self, index: int, x: Tensor, frame_masks: Mapping[str, Tensor], available: Tensor
    ) -> Tensor:
        """Check expert ``index``'s input; zero unavailable rows; pool variable-length ones."""
        name = self.experts[index]
        info, batch = self.expert_info[name], available.shape[0]
        x = x.to(self.video_reduce[index].weight.dtype)  # type: ignore[arg-type]  # an nn.Linear
        if not info.variable_length:
            if x.dim() != 2 or x.shape != (batch, info.dim):
                raise ValueError(
                    f"encode_video: features[{name!r}] should be ({batch}, {info.dim}) "
                    f"(fixed-size expert), got {tuple(x.shape)}"
                )
            return torch.where(available.unsqueeze(-1), x, 0.0)
        if x.dim() != 3 or x.shape[0] != batch or x.shape[2] != info.dim:
            raise ValueError(
                f"encode_video: features[{name!r}] should be (B={batch}, T, {info.dim}) "
                f"(variable-length expert), got {tuple(x.shape)}"
            )
        if name not in frame_masks:
            raise ValueError(f"encode_video: frame_masks[{name!r}] is missing (variable-length)")
        frames = frame_masks[name]
        if frames.dtype != torch.bool or frames.shape != x.shape[:2]:
            raise ValueError(
                f"encode_video: frame_masks[{name!r}] should be bool {tuple(x.shape[:2])}, "
                f"got {frames.dtype} {tuple(frames.shape)}"
            )
        frames = frames & available.unsqueeze(-1)
        no_frames = ((available & ~frames.any(dim=1)).nonzero().flatten().tolist()
                     if self.check_values else [])
        if no_frames:
            raise ValueError(
                f"encode_video: expert {name!r} is marked available for batch rows "
                f"{no_frames[:10]} whose frame mask is all False"
            )
        return self.video_pooling[index](x, frames)

    # ------------------------------------------------------------ similarity
    @staticmethod
    def similarity(
        text_emb: Tensor, text_logits: Tensor, video_emb: Tensor, available: Tensor,
        check_values: bool = True,
    ) -> Tensor:
        """Mixture-of-experts similarity (Bt, Bv), captions x videos.

        sim[t, v] = sum_e w_te a_ve <t_te, v_ve> / sum_e w_te a_ve with w = softmax(logits)
        and a the availability: softmax weights renormalised over video v's available
        experts (Miech et al. MoEE; reference ``sharded_cross_view_inner_product`` with
        ``keep_missing_modalities=False``). With unit-norm embeddings <.,.> is the cosine.
        The denominator is clamped to the smallest positive float, so a video whose
        available experts all get underflowed weights scores 0 rather than NaN.
        ``check_values=False`` skips the one check that reads a value back to the host.
        """
        if available.dtype != torch.bool or available.shape != video_emb.shape[:2]:
            raise ValueError(
                f"similarity: expected available bool {tuple(video_emb.shape[:2])}, "
                f"got {available.dtype} {tuple(available.shape)}"
            )
        if text_emb.shape[1:] != video_emb.shape[1:] or text_logits.shape != text_emb.shape[:2]:
            raise ValueError(
                f"similarity: shapes do not match: text {tuple(text_emb.shape)}, logits "
                f"{tuple(text_logits.shape)}, video {tuple(video_emb.shape)}"
            )
        if check_values and not available.any(dim=1).all():
            raise ValueError("similarity: some videos have no available expert")
        weights = torch.softmax(text_logits, dim=-1)
        avail = available.to(weights.dtype)
        weighted_text = text_emb * weights.unsqueeze(-1)
        numerator = torch.einsum("ted,ved->tv", weighted_text, video_emb * avail.unsqueeze(-1))
        denominator = (weights @ avail.T).clamp_min(torch.finfo(weights.dtype).tiny)
        return numerator / denominator

    def forward(
        self,
        tokens: Tensor,
        mask: Tensor,
        features: Mapping[str, Tensor],
        frame_masks: Mapping[str, Tensor],
        available: Tensor,
    ) -> Tensor:
        """similarity(encode_text(tokens, mask), encode_video(...)) -> (B, B)."""
        text_emb, logits = self.encode_text(tokens, mask)
        video_emb = self.encode_video(features, frame_masks, available)
        return self.similarity(text_emb, logits, video_emb, available)


if TYPE_CHECKING:
    from rudder.models.interface import RetrievalModel

    _OFFERS_THE_INTERFACE: type[RetrievalModel] = CollaborativeExperts  # checked by mypy
