"""What a training batch gives its loss besides the similarities: relevance, pair labels,
caption similarities, a generator; and which captions a batch holds (DESIGN.md conventions).

The options are ``supervision.*`` config fields (docs/fidelity.md compares them with the
papers): ``alpha_n``/``alpha_v`` (pair labels), ``rho`` (video class sets),
``batch_relevance``, ``manual_relations``, ``relation_batches``, ``description_labels``,
``positive_sampling`` and ``positive_threshold``.
"""

from __future__ import annotations

import numpy as np
import torch

from rudder import losses
from rudder.config import ConfigError
from rudder.supervision import (
    RelationTable,
    batch_labels,
    batch_relevance,
    description_pairs,
    relevance,
)
from rudder.text import CaptionSimilarity


class BatchSupervision:
    """Per-run tables (relations, caption kinds, caption similarity) and per-batch matrices.

    A batch is ``(videos, slots)``: grid coordinates of the training split. A slot ``-1 - k``
    stands for training caption ``k`` (in ``caption_mask`` order) drawn for that video by
    ``positive_sampling: relevant``; ``own_slots`` then keeps the video's own caption.
    """

    def __init__(self, config, folder, train, loss_fn, device):
        sup, self.sup, self.train = config.supervision, config.supervision, train
        self.needs = set(loss_fn.requires) | set(loss_fn.optional)
        self.device = device
        if train.nouns is None and ({"relevance", "labels"} & set(loss_fn.requires)
                                    or sup.positive_sampling == "relevant"):
            raise ConfigError(
                f"loss {config.loss.name!r} or supervision.positive_sampling needs noun/verb "
                f"classes, but {folder.root} has no noun_classes/verb_classes columns; add them "
                "with `python -m heuristics label`"
            )
        if train.nouns is not None:
            self.video_nouns, self.video_verbs = train.video_classes(sup.rho)
            self.cells = torch.nonzero(train.caption_mask)  # training caption k -> (video, slot)
            self.caption_nouns = train.nouns[train.caption_mask].float()
            self.caption_verbs = train.verbs[train.caption_mask].float()
        self.relations = self.relation_pairs = self.kinds = None
        if sup.relation_batches and not sup.manual_relations:
            raise ConfigError("supervision.relation_batches needs supervision.manual_relations=true")
        if sup.manual_relations:
            self._load_relations(folder)
        if sup.description_labels:
            table = folder.captions("train", columns=["caption_id", "kind"]).to_pydict()
            kind_of = dict(zip(table["caption_id"], table["kind"]))
            self.kinds = np.vectorize(kind_of.get, otypes=[object])(train.caption_ids)
        self.loss_fn = loss_fn
        if "text_sims" in self.needs:
            texts = [t for t in train.caption_texts.reshape(-1) if t is not None]
            self.text_similarity = CaptionSimilarity().fit(texts)
            if getattr(loss_fn, "scope", None) == "dataset" and loss_fn.threshold is None:
                # hn_exclusion's one threshold over all training caption pairs, kept in the config
                params = config.loss.params
                params["threshold"] = self.text_similarity.top_fraction_threshold(texts, loss_fn.exclude_top)
                self.loss_fn = losses.build(config.loss.name, **params)

    def _load_relations(self, folder) -> None:
        table = folder.relations()
        if table is None:
            raise ConfigError(f"supervision.manual_relations is set but {folder.root} has no relations config")
        ids = self.train.caption_ids
        valid = np.argwhere(np.vectorize(lambda c: c is not None, otypes=[bool])(ids))
        self.relations = RelationTable(ids[valid[:, 0], valid[:, 1]], table)
        if self.sup.relation_batches:
            low, high, _ = self.relations.pairs()
            pairs = torch.from_numpy(np.concatenate([valid[low], valid[high]], axis=1))
            self.relation_pairs = pairs[pairs[:, 0] != pairs[:, 2]]  # a batch holds a video once

    def caption_cells(self, videos: torch.Tensor, slots: torch.Tensor):
        """Grid coordinates ``(video, slot)`` of the batch captions (drawn ones resolved)."""
        drawn = slots < 0
        if not bool(drawn.any()):
            return videos, slots
        where = self.cells[(-1 - slots).clamp(min=0)]
        return torch.where(drawn, where[:, 0], videos), torch.where(drawn, where[:, 1], slots)

    def positives(self, videos: torch.Tensor, slots: torch.Tensor, generator: torch.Generator):
        """``(videos, slots, own_slots)``: with ``positive_sampling: relevant`` each video's
        caption is drawn uniformly among the training captions whose relevance to the video's
        own (uniformly drawn) caption exceeds ``positive_threshold`` (its own caption when
        none does), as EgoVLP's and SMS's EPIC-100 MIR training sampler (``relevancy = 0.1``
        in their ``_get_caption``/``get_raw_item``); with ``own`` nothing changes."""
        if self.sup.positive_sampling == "own":
            return videos, slots, slots
        own_n, own_v = self.train.nouns[videos, slots].float(), self.train.verbs[videos, slots].float()
        candidates = relevance(own_n, own_v, self.caption_nouns, self.caption_verbs) > self.sup.positive_threshold
        none = ~candidates.any(1)
        pick = torch.multinomial(candidates.float() + none[:, None].float(), 1, generator=generator)[:, 0]
        return videos, torch.where(none, slots, -1 - pick), slots

    def batch(self, videos, slots, own_slots, generator) -> dict:
        """The inputs the loss reads, on its device: relevance, labels, text_sims, generator."""
        train, sup, needs = self.train, self.sup, self.needs
        cap_videos, cap_slots = self.caption_cells(videos, slots)
        cells = cap_videos.numpy(), cap_slots.numpy()
        extra = {}
        nouns = verbs = None
        if train.nouns is not None:
            nouns, verbs = train.nouns[cap_videos, cap_slots].float(), train.verbs[cap_videos, cap_slots].float()
        else:
            needs = needs - {"relevance", "labels"}  # optional inputs the dataset cannot give
        if "relevance" in needs:
            if sup.batch_relevance == "caption":  # caption i vs the own batch caption of video j
                own_n, own_v = train.nouns[videos, own_slots].float(), train.verbs[videos, own_slots].float()
                extra["relevance"] = batch_relevance(nouns, verbs, own_n, own_v)
            else:
                extra["relevance"] = batch_relevance(nouns, verbs, self.video_nouns[videos], self.video_verbs[videos])
        if "labels" in needs:
            ids = list(train.caption_ids[cells])
            manual = None if self.relations is None else self.relations.lookup(ids, ids)
            description = None if self.kinds is None else description_pairs(self.kinds[cells], nouns)
            extra["labels"] = batch_labels(nouns, verbs, sup.alpha_n, sup.alpha_v, manual=manual,
                                           description=description)
        if "text_sims" in needs:
            extra["text_sims"] = self.text_similarity.pairwise(list(train.caption_texts[cells]))
        if "generator" in needs:
            extra["generator"] = generator
        return {k: v.to(self.device) if torch.is_tensor(v) else v for k, v in extra.items()}
