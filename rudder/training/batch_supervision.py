"""What a training batch gives its loss besides the similarities: relevance, pair labels,
caption similarities, a generator; and which captions a batch holds (conventions:
docs/architecture.md).

The options are ``supervision.*`` config fields (docs/fidelity.md compares them with the
papers): ``alpha_n``/``alpha_v`` (pair labels), ``rho`` (video class sets),
``batch_relevance``, ``manual_relations``, ``relation_batches``, ``description_labels``,
``positive_sampling`` and ``positive_threshold``.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

import numpy as np
import torch

from rudder import losses
from rudder.config import ConfigError
from rudder.devices import upload
from rudder.supervision import (
    RelationTable,
    RelevantCaptionSampler,
    batch_labels,
    batch_relevance,
    description_pairs,
)
from rudder.text import CaptionSimilarity


class BatchSupervision:
    """Per-run tables (relations, caption kinds, caption similarity) and per-batch matrices.

    A batch is ``(videos, slots)``: grid coordinates of the training split. A slot ``-1 - k``
    stands for training caption ``k`` (in ``caption_mask`` order) drawn for that video by
    ``positive_sampling: relevant``; ``own_slots`` then keeps the video's own caption.

    :meth:`batch` makes each input the loss declares (``requires`` and ``optional``) with its
    producer in :attr:`PRODUCERS`, the one place a new loss input is made. The object is
    also the run's :class:`rudder.losses.RunFacts`, from which a loss takes the parameters
    it needs from the run (``rudder.losses.run_params``).
    """

    def __init__(self, config, folder, train, device, run_dir=None):
        sup, self.sup, self.train = config.supervision, config.supervision, train
        loss = losses.loss_class(config.loss.name)
        self.needs = set(loss.requires) | set(loss.optional)
        self.device = device
        self.embedding_dim = config.model.shared_dim
        unknown = sorted(self.needs - set(self.PRODUCERS))
        if unknown:
            raise ConfigError(f"loss {config.loss.name!r} reads {unknown}, which no producer of "
                              "rudder.training.batch_supervision.BatchSupervision.PRODUCERS makes")
        if train.nouns is None and ({"relevance", "labels"} & set(loss.requires)
                                    or sup.positive_sampling == "relevant"):
            raise ConfigError(
                f"loss {config.loss.name!r} or supervision.positive_sampling needs noun/verb "
                f"classes, but {folder.root} has no noun_classes/verb_classes columns; add them "
                "with `python -m heuristics label`"
            )
        if train.nouns is None:
            self.needs -= {"relevance", "labels"}  # optional inputs the dataset cannot give
        else:
            self.video_nouns, self.video_verbs = train.video_classes(sup.rho)
            self.cells = torch.nonzero(train.caption_mask)  # training caption k -> (video, slot)
            self.caption_nouns = train.nouns[train.caption_mask].float()
            self.caption_verbs = train.verbs[train.caption_mask].float()
            if sup.positive_sampling == "relevant":
                texts = train.caption_texts[train.caption_mask.numpy()]
                self.sampler = RelevantCaptionSampler(
                    self.caption_nouns, self.caption_verbs, distinct_text_weights(texts),
                    sup.positive_threshold)
        self.relations = self.relation_pairs = self.kinds = None
        if sup.manual_relations:
            self._load_relations(folder, run_dir)
        if sup.description_labels:
            table = folder.captions("train", columns=["caption_id", "kind"]).to_pydict()
            kind_of = dict(zip(table["caption_id"], table["kind"], strict=True))
            self.kinds = np.vectorize(kind_of.get, otypes=[object])(train.caption_ids)
        texts = train.caption_texts.reshape(-1)
        self._texts = [t for t in texts if t is not None]
        present = np.array([t is not None for t in texts], dtype=bool)
        self._text_videos = np.flatnonzero(present) // train.caption_texts.shape[1]
        needed = "text_sims" in self.needs  # fitted now, not in the first step
        self._text_similarity = CaptionSimilarity().fit(self._texts) if needed else None

    @property
    def text_similarity(self) -> CaptionSimilarity:
        """The caption similarity fitted on the training captions (fitted on first use)."""
        if self._text_similarity is None:
            self._text_similarity = CaptionSimilarity().fit(self._texts)
        return self._text_similarity

    def caption_similarity_threshold(self, top_fraction: float,
                                     other_videos: bool = False) -> float:
        """:class:`rudder.losses.RunFacts`: the similarity above which the top ``top_fraction``
        of all training caption pairs lie (pairs of captions of different videos only, with
        ``other_videos``)."""
        groups = self._text_videos if other_videos else None
        return self.text_similarity.top_fraction_threshold(self._texts, top_fraction,
                                                           groups=groups)

    def _load_relations(self, folder, run_dir=None) -> None:
        if self.sup.relations_file:
            table = read_relations_file(self.sup.relations_file, run_dir)
        else:
            table = folder.relations()
        if table is None:
            raise ConfigError(f"supervision.manual_relations is set but {folder.root} has no "
                              "relations config")
        ids = self.train.caption_ids
        valid = np.argwhere(np.vectorize(lambda c: c is not None, otypes=[bool])(ids))
        self.relations = RelationTable(ids[valid[:, 0], valid[:, 1]], table)
        if self.sup.relation_batches:
            low, high = self.relations.pairs()
            pairs = torch.from_numpy(np.concatenate([valid[low], valid[high]], axis=1))
            self.relation_pairs = pairs[pairs[:, 0] != pairs[:, 2]]  # a batch holds a video once

    def caption_cells(self, videos: torch.Tensor,
                      slots: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """Grid coordinates ``(video, slot)`` of the batch captions (drawn ones resolved)."""
        if self.sup.positive_sampling == "own":  # only drawn positives have slots < 0
            return videos, slots
        drawn = slots < 0
        where = self.cells[(-1 - slots).clamp(min=0)]
        return torch.where(drawn, where[:, 0], videos), torch.where(drawn, where[:, 1], slots)

    def positives(self, videos: torch.Tensor, slots: torch.Tensor, generator: torch.Generator):
        """``(videos, slots, own_slots)``: with ``positive_sampling: relevant`` each video's
        caption is drawn uniformly among the distinct training caption texts whose relevance
        to the video's own (uniformly drawn) caption exceeds ``positive_threshold``, then
        uniformly among the captions with that text (its own caption when none passes), as
        EgoVLP's and SMS's EPIC-100 MIR training sampler (``relevancy = 0.1`` in their
        ``_get_caption``/``get_raw_item``, whose relevancy columns are the unique
        narrations of ``create_sentence_df``), drawn by :class:`RelevantCaptionSampler`
        (linear in the training captions per epoch); with ``own`` nothing changes."""
        if self.sup.positive_sampling == "own":
            return videos, slots, slots
        picks, none = self.sampler.draw(self.train.nouns[videos, slots],
                                        self.train.verbs[videos, slots], generator)
        drawn = torch.where(torch.from_numpy(none), slots, -1 - torch.from_numpy(picks))
        return videos, drawn, slots

    def batch(self, videos, slots, own_slots, generator) -> dict:
        """The inputs the loss reads, on its device (one :attr:`PRODUCERS` entry each)."""
        batch = _Batch(videos, own_slots, *self.caption_cells(videos, slots), generator)
        made = {name: make(self, batch) for name, make in self.PRODUCERS.items()
                if name in self.needs}
        return {k: upload(v, self.device) if torch.is_tensor(v) else v for k, v in made.items()}

    def _caption_classes(self, batch: _Batch) -> tuple[torch.Tensor, torch.Tensor]:
        """Noun and verb multi-hots of the batch captions, on the loss's device (no host
        round trip)."""
        if batch.classes is None:
            batch.classes = tuple(
                upload(x[batch.cap_videos, batch.cap_slots], self.device, torch.float32)
                for x in (self.train.nouns, self.train.verbs)
            )
        return batch.classes

    def _relevance(self, batch: _Batch) -> torch.Tensor:
        """Caption ``i`` vs the own batch caption of video ``j`` (``batch_relevance: caption``)
        or vs video ``j``'s rho-aggregated classes (``video``)."""
        nouns, verbs = self._caption_classes(batch)
        if self.sup.batch_relevance == "caption":
            own = (upload(x[batch.videos, batch.own_slots], self.device, torch.float32)
                   for x in (self.train.nouns, self.train.verbs))
        else:
            own = (upload(x[batch.videos], self.device)
                   for x in (self.video_nouns, self.video_verbs))
        return batch_relevance(nouns, verbs, *own)

    def _labels(self, batch: _Batch) -> torch.Tensor:
        """Pair labels: the noun/verb heuristic, description pairs, then manual relations."""
        nouns, verbs = self._caption_classes(batch)
        cells = batch.cells()
        ids = list(self.train.caption_ids[cells])
        manual = None if self.relations is None else self.relations.lookup(ids, ids)
        description = None if self.kinds is None else description_pairs(self.kinds[cells], nouns)
        return batch_labels(nouns, verbs, self.sup.alpha_n, self.sup.alpha_v, manual=manual,
                            description=description)

    def _text_sims(self, batch: _Batch) -> torch.Tensor:
        """Caption-caption similarities of the batch captions."""
        return self.text_similarity.pairwise(list(self.train.caption_texts[batch.cells()]))

    def _generator(self, batch: _Batch) -> torch.Generator | None:
        return batch.generator

    # loss input name -> producer(self, batch); a loss declaring another input is an error
    PRODUCERS: ClassVar[dict] = {
        "relevance": _relevance,
        "labels": _labels,
        "text_sims": _text_sims,
        "generator": _generator,
    }


def distinct_text_weights(texts: np.ndarray) -> torch.Tensor:
    """Per caption, 1 / the number of captions with the same text: drawing captions with
    these weights draws each distinct text uniformly (a text whose captions are only partly
    allowed counts in proportion)."""
    _, inverse, counts = np.unique(np.asarray(texts, dtype=str), return_inverse=True,
                                   return_counts=True)
    return torch.from_numpy(1.0 / counts[inverse]).float()


@dataclass
class _Batch:
    """A training batch as the producers read it: its videos, their own caption slots, the
    grid cells of its captions (drawn ones resolved), the loss's generator."""

    videos: torch.Tensor
    own_slots: torch.Tensor
    cap_videos: torch.Tensor
    cap_slots: torch.Tensor
    generator: torch.Generator | None
    classes: tuple[torch.Tensor, torch.Tensor] | None = None  # set by _caption_classes

    def cells(self) -> tuple[np.ndarray, np.ndarray]:
        return self.cap_videos.numpy(), self.cap_slots.numpy()


def read_relations_file(path, run_dir=None):
    """The relations table ``supervision.relations_file`` names (a relative path is read from
    ``run_dir``): parquet with ``caption_id_a``, ``caption_id_b`` (strings) and ``label``
    (0-3); anything else is a :class:`ConfigError` naming the file."""
    from pathlib import Path

    import pyarrow.parquet as pq

    from rudder.labels import PairLabel

    path = Path(path)
    if not path.is_absolute() and run_dir is not None:
        path = Path(run_dir) / path
    where = f"supervision.relations_file {path}"
    if not path.is_file():
        raise ConfigError(f"{where}: no such file; name a parquet relations table "
                          "(caption_id_a, caption_id_b, label)")
    try:
        table = pq.read_table(path)
    except Exception as error:  # noqa: BLE001 -- any unreadable file gets the same message
        raise ConfigError(f"{where}: not a parquet table ({error})") from None
    missing = [c for c in ("caption_id_a", "caption_id_b", "label") if c not in table.column_names]
    if missing:
        raise ConfigError(f"{where}: missing column(s) {missing}")
    labels = table.column("label").to_numpy(zero_copy_only=False)
    if len(labels) and (labels.min() < 0 or labels.max() > max(PairLabel)):
        raise ConfigError(f"{where}: labels must be 0-3 (negative, partial, positive, "
                          "description)")
    return table
