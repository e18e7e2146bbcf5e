"""positive_sampling: relevant -- EgoVLP/SMS's EPIC-100 MIR caption sampler."""

import collections

import numpy as np
import pytest
import torch

from rudder.supervision import relevance
from rudder.training.batch_supervision import distinct_text_weights
from rudder.training.distributed import DistContext
from rudder.training.trainer import Trainer

from ..factories import tiny_config


def test_drawn_captions_are_relevant_to_the_video(tiny_dataset, tmp_path):
    config = tiny_config(tiny_dataset, "mimm_adaptive", supervision={
        "positive_sampling": "relevant", "positive_threshold": 0.3})
    run = Trainer(config, tmp_path, DistContext())
    sup, train = run.supervision, run.splits["train"]
    videos = torch.arange(train.num_videos)
    slots = torch.zeros_like(videos)
    _, drawn, own = sup.positives(videos, slots, torch.Generator().manual_seed(0))
    cap_videos, cap_slots = sup.caption_cells(videos, drawn)
    assert (cap_videos != videos).sum() > len(videos) // 2  # mostly captions of other videos
    scores = relevance(train.nouns[videos, own].float(), train.verbs[videos, own].float(),
                       train.nouns[cap_videos, cap_slots].float(),
                       train.verbs[cap_videos, cap_slots].float())
    assert bool((scores.diagonal() > 0.3).all())
    inputs = sup.batch(videos[:8], drawn[:8], own[:8], None)
    # relevance[i, j]: drawn caption i vs the own caption of video j; the diagonal is > 0.3
    assert bool((inputs["relevance"].diagonal() > 0.3).all())


def test_distinct_texts_are_drawn_uniformly(tiny_dataset, tmp_path):
    # EgoVLP's relevancy columns are unique narrations: a text shared by four captions is
    # drawn as often as a text of one caption
    assert distinct_text_weights(np.array(["a", "b", "a", "c", "a"])).tolist() == pytest.approx(
        [1 / 3, 1, 1 / 3, 1, 1 / 3])
    config = tiny_config(tiny_dataset, "mimm_adaptive", supervision={
        "positive_sampling": "relevant", "positive_threshold": 0.3})
    run = Trainer(config, tmp_path, DistContext())
    sup, train = run.supervision, run.splits["train"]
    texts = train.caption_texts[train.caption_mask.numpy()]
    for video in range(train.num_videos):  # a video whose candidates repeat a text
        own = relevance(train.nouns[video, :1].float(), train.verbs[video, :1].float(),
                        sup.caption_nouns, sup.caption_verbs)[0] > 0.3
        if len(set(texts[own.numpy()])) < int(own.sum()):
            break
    else:
        pytest.fail("the tiny dataset has no repeated candidate text")
    draws = 20_000
    videos, slots = torch.full((draws,), video), torch.zeros(draws, dtype=torch.long)
    _, drawn, _ = sup.positives(videos, slots, torch.Generator().manual_seed(0))
    cap_videos, cap_slots = sup.caption_cells(videos, drawn)
    counts = collections.Counter(train.caption_texts[cap_videos.numpy(), cap_slots.numpy()])
    assert set(counts) == set(texts[own.numpy()])
    for text, count in counts.items():
        assert count / draws == pytest.approx(1 / len(counts), abs=0.02), text


def test_training_with_relevant_positives(train_tiny, tmp_path):
    result = train_tiny(tmp_path / "run", "--loss", "sms", "--epochs", "1",
                        "--set", "supervision.positive_sampling=relevant")
    assert 0 <= result["test"]["t2v"]["R10"] <= 100
