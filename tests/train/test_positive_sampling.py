"""positive_sampling: relevant -- EgoVLP/SMS's EPIC-100 MIR caption sampler."""

import torch

from rudder.distributed import DistContext
from rudder.supervision import relevance
from rudder.trainer import Trainer

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


def test_training_with_relevant_positives(train_tiny, tmp_path):
    result = train_tiny(tmp_path / "run", "--loss", "sms", "--epochs", "1",
                        "--set", "supervision.positive_sampling=relevant")
    assert 0 <= result["test"]["t2v"]["R10"] <= 100
