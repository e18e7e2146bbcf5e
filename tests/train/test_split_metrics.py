"""split_metrics: every v2t metric ranks the same queries, the videos with a valid caption."""

import dataclasses

import numpy as np
import pytest
import torch

from rudder import metrics
from rudder.distributed import DistContext
from rudder.inference import relevance_matrix, split_metrics
from rudder.trainer import Trainer

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
    expected["nDCG"] = 100 * metrics.ndcg(rest_sims[valid].T, rest_rel[valid].T)
    expected["mAP"] = 100 * metrics.mean_average_precision(rest_sims[valid].T, rest_rel[valid].T)
    assert result == pytest.approx(expected)
    assert result["nDCG"] > 0 and np.isfinite(result["MnR"])
