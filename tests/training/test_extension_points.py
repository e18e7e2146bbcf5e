"""Extension points of docs/architecture.md ("How to extend"): a loss and a model added from
outside the library train through the unchanged trainer, and what a run supplies to a loss
(run parameters, batch inputs) goes through one place each."""

import json
from typing import ClassVar

import pytest
import torch
import torch.nn.functional as F

from rudder import losses, models
from rudder.config import ConfigError
from rudder.evaluation.loading import load_run
from rudder.losses import _base
from rudder.models.ce import CollaborativeExperts
from rudder.text import CaptionSimilarity
from rudder.training.batch_supervision import BatchSupervision
from rudder.training.distributed import DistContext
from rudder.training.trainer import Trainer

from ..factories import tiny_config


class SymmetricInfoNCE(losses.RetrievalLoss):
    """``toy_infonce``: symmetric InfoNCE on the batch (Oord et al. 2018; CLIP's loss),
    ``-1/2B sum_a [log softmax_b(s_ab / t)_aa + log softmax_b(s_ba / t)_aa]``; it asks for
    ``relevance`` only to show that the trainer hands a loss exactly what it declares."""

    name = "toy_infonce"
    requires = ("relevance",)
    param_names = ("temperature",)
    seen: ClassVar[list] = []

    def __init__(self, temperature: float = 0.1):
        super().__init__()
        self.temperature = _base.check_number(
            self.name, "temperature", temperature, low=0, low_open=True
        )

    def compute(self, sims, relevance):
        type(self).seen.append(sorted(relevance.shape))
        target = torch.arange(len(sims), device=sims.device)
        logits = sims / self.temperature
        return (F.cross_entropy(logits, target) + F.cross_entropy(logits.T, target)) / 2


class MeanPool(torch.nn.Module):
    """A toy model: mean word embedding and mean frames, one linear map per expert,
    Collaborative Experts' mixture-of-experts similarity."""

    similarity = staticmethod(CollaborativeExperts.similarity)

    def __init__(self, config, experts, vocab_size):
        super().__init__()
        self.experts, self.check_values, dim = sorted(experts), True, config.shared_dim
        self.words = torch.nn.Embedding(vocab_size, config.word_dim, padding_idx=0)
        self.text = torch.nn.Linear(config.word_dim, dim * len(self.experts))
        self.mixture = torch.nn.Linear(config.word_dim, len(self.experts))
        self.video = torch.nn.ModuleList(torch.nn.Linear(experts[e].dim, dim) for e in self.experts)

    def encode_text(self, tokens, mask):
        weights = mask.unsqueeze(-1).float()
        pooled = (self.words(tokens) * weights).sum(1) / weights.sum(1).clamp_min(1.0)
        text = self.text(pooled).view(len(tokens), len(self.experts), -1)
        return F.normalize(text, dim=-1), self.mixture(pooled)

    def encode_video(self, features, frame_masks, available):
        out = []
        for name, layer in zip(self.experts, self.video, strict=True):
            x = features[name].float()
            if x.dim() == 3:
                frames = frame_masks[name].unsqueeze(-1).float()
                x = (x * frames).sum(1) / frames.sum(1).clamp_min(1.0)
            out.append(F.normalize(layer(x), dim=-1))
        return torch.stack(out, 1) * available.unsqueeze(-1)


def test_a_new_loss_and_a_new_model_train_an_epoch(monkeypatch, train_tiny, tmp_path):
    """docs/architecture.md's recipe: one registry line each (here monkeypatched)."""
    monkeypatch.setitem(losses._REGISTRY, SymmetricInfoNCE.name, SymmetricInfoNCE)
    monkeypatch.setitem(models.MODELS, "meanpool", lambda: MeanPool)
    SymmetricInfoNCE.seen.clear()
    run = tmp_path / "run"
    result = train_tiny(
        run,
        "--epochs",
        "1",
        "--loss",
        "toy_infonce",
        "--set",
        "loss.params.temperature=0.05",
        "--set",
        "model.name=meanpool",
    )
    assert SymmetricInfoNCE.seen[0] == [8, 8]  # the batch relevance, as it declared
    line = json.loads((run / "metrics.jsonl").read_text().splitlines()[0])
    assert line["train_loss"] > 0 and 0 <= result["test"]["t2v"]["R10"] <= 100
    loaded = load_run(run)  # evaluation and the app load it through models.build
    assert type(loaded.model) is MeanPool and loaded.config.loss.params == {"temperature": 0.05}


def test_the_run_supplies_dw_its_dimension(tiny_dataset, tmp_path):
    run = Trainer(tiny_config(tiny_dataset, "dw"), tmp_path / "a", DistContext())
    assert run.loss_fn.dim == 16 and run.config.loss.params == {
        "dim": 16
    }  # recorded in config.yaml
    run = Trainer(tiny_config(tiny_dataset, "dw", {"dim": 4}), tmp_path / "b", DistContext())
    assert run.loss_fn.dim == 4


def test_the_run_supplies_hn_exclusion_its_dataset_threshold(tiny_dataset, tmp_path):
    config = tiny_config(tiny_dataset, "hn_exclusion", {"exclude_top": 0.05})
    run = Trainer(config, tmp_path / "a", DistContext())
    texts = [t for t in run.splits["train"].caption_texts.reshape(-1) if t is not None]
    expected = CaptionSimilarity().fit(texts).top_fraction_threshold(texts, 0.05)
    assert run.loss_fn.threshold == expected == run.config.loss.params["threshold"]
    run = Trainer(
        tiny_config(tiny_dataset, "hn_exclusion", {"scope": "batch"}), tmp_path / "b", DistContext()
    )
    assert run.loss_fn.threshold is None and "threshold" not in run.config.loss.params


def test_the_papers_threshold_comes_from_pairs_of_captions_of_different_videos(tiny_dataset,
                                                                               tmp_path):
    config = tiny_config(tiny_dataset, "hn_exclusion",
                         {"exclude_top": 0.05, "threshold_pairs": "other_videos"})
    run = Trainer(config, tmp_path / "a", DistContext())
    grid = run.splits["train"].caption_texts
    texts, videos = zip(*[(t, v) for v in range(grid.shape[0]) for t in grid[v] if t is not None],
                        strict=True)
    similarity = CaptionSimilarity().fit(texts)
    expected = similarity.top_fraction_threshold(texts, 0.05, groups=videos)
    assert run.loss_fn.threshold == expected == run.config.loss.params["threshold"]
    assert expected != similarity.top_fraction_threshold(texts, 0.05)  # not the default's


def test_every_loss_input_has_one_producer():
    assert set(BatchSupervision.PRODUCERS) == set(_base._CHECKS)


def test_a_loss_reading_an_input_nobody_makes_is_an_error(monkeypatch, tiny_dataset, tmp_path):
    class NeedsAudio(SymmetricInfoNCE):
        name, requires = "toy_audio", ("audio",)

    monkeypatch.setitem(losses._REGISTRY, NeedsAudio.name, NeedsAudio)
    with pytest.raises(ConfigError, match=r"reads \['audio'\], which no producer"):
        Trainer(tiny_config(tiny_dataset, "toy_audio"), tmp_path, DistContext())
