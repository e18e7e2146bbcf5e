"""split_metrics: every v2t metric ranks the same queries, the videos with a valid caption."""

import dataclasses

import numpy as np
import pytest
import torch

from rudder.evaluation import metrics
from rudder.evaluation.inference import relevance_matrix, split_metrics
from rudder.training.distributed import DistContext
from rudder.training.trainer import Trainer

from ..factories import tiny_config


def test_a_video_without_a_caption_is_no_v2t_query(tiny_dataset, tmp_path):
    data = Trainer(tiny_config(tiny_dataset), tmp_path, DistContext())._load("test")
    mask = data.caption_mask.clone()
    mask[0] = False  # e.g. no caption in the language evaluated
    data = dataclasses.replace(data, caption_mask=mask)
    slots = mask.shape[1]
    sims = torch.randn(mask.numel(), mask.shape[0], generator=torch.Generator().manual_seed(0))
    result = split_metrics(sims, data, rho=0.25)["v2t"]
    # the same figures as on the split without video 0 (its caption rows and its column)
    rest_sims, rest_mask = sims.numpy()[slots:, 1:], mask.numpy()[1:]
    rest_rel = relevance_matrix(data, 0.25).numpy()[slots:, 1:]
    valid = rest_mask.reshape(-1)
    expected = metrics.retrieval_metrics(rest_sims, query_masks=rest_mask, direction="v2t")
    for name, fn in (("nDCG", metrics.ndcg), ("mAP", metrics.mean_average_precision)):
        per_query = fn(rest_sims[valid].T, rest_rel[valid].T, reduction="none")
        count = int((~np.isnan(per_query)).sum())
        expected[name] = 100 * np.nanmean(per_query) if count else None
        expected[f"{name}_queries"] = count
    assert result == pytest.approx(expected)
    assert result["nDCG"] > 0 and np.isfinite(result["MnR"])


def _split(tiny_dataset, tmp_path):
    return Trainer(tiny_config(tiny_dataset), tmp_path, DistContext())._load("test")


def test_undefined_map_is_none_with_its_query_count(tiny_dataset, tmp_path):
    data = _split(tiny_dataset, tmp_path)
    rel = relevance_matrix(data, 0.25).numpy()
    k = data.caption_mask.shape[1]
    own = torch.zeros(data.caption_mask.numel(), data.caption_mask.shape[0])
    own[torch.arange(own.shape[0]), torch.arange(own.shape[0]) // k] = 1.0  # perfect ranking
    result = split_metrics(own, data, rho=0.25)
    valid = data.caption_mask.numpy().reshape(-1)
    with_full = int((rel[valid] == 1).any(axis=1).sum())  # t2v queries with an R = 1 video
    assert result["t2v"]["mAP_queries"] == with_full
    assert (result["t2v"]["mAP"] is None) == (with_full == 0)
    # own_video: every valid caption's own video has R = 1, so every query has mAP
    own_result = split_metrics(own, data, rho=0.25, own_video=True)
    assert own_result["t2v"]["mAP_queries"] == int(valid.sum())
    assert own_result["v2t"]["mAP_queries"] == int(data.caption_mask.any(1).sum())
    assert own_result["t2v"]["mAP"] > 0


def test_own_video_relevance_sets_exactly_the_own_cells(tiny_dataset, tmp_path):
    data = _split(tiny_dataset, tmp_path)
    ref = relevance_matrix(data, 0.25)
    own = relevance_matrix(data, 0.25, own_video=True)
    k = data.caption_mask.shape[1]
    for row in range(ref.shape[0]):  # a direct loop over the caption slots
        for video in range(ref.shape[1]):
            is_own = bool(data.caption_mask.reshape(-1)[row]) and row // k == video
            assert own[row, video] == (1.0 if is_own else ref[row, video])
