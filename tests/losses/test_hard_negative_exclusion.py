"""hn_exclusion: which pairs are excluded, hand-worked values, identity with hn."""

import numpy as np
import pytest
import torch

from rudder import losses
from rudder.losses.hard_negative_exclusion import excluded_pairs

from .conftest import random_batch

TEXT = [[1.0, 0.9, 0.1], [0.95, 1.0, 0.2], [0.1, 0.2, 1.0]]


def test_excluded_pairs_counts_and_ties():
    text = torch.tensor(TEXT, dtype=torch.float64)
    # 6 off-diagonal pairs: exclude_top 0.17 -> floor(1.02) = 1 pair, the largest (1, 0) 0.95
    assert excluded_pairs(text, 0.17).nonzero().tolist() == [[1, 0]]
    # 0.34 -> 2 pairs: (1, 0) 0.95 and (0, 1) 0.9; the diagonal never counts
    assert excluded_pairs(text, 0.34).nonzero().tolist() == [[0, 1], [1, 0]]
    assert not excluded_pairs(text, 0.1).any()  # floor(0.6) = 0
    # ties at the boundary: all six pairs equal -> the first two in row-major order
    flat = torch.full((3, 3), 0.5, dtype=torch.float64)
    assert excluded_pairs(flat, 0.34).nonzero().tolist() == [[0, 1], [0, 2]]
    # float rounding: 0.7 * 90 = 62.99999... still means 63 pairs of a 10 x 10 batch
    assert int(excluded_pairs(torch.rand(10, 10), 0.7).sum()) == 63


def test_hn_exclusion_hand_worked(s3):
    text = torch.tensor(TEXT, dtype=torch.float64)
    # exclude_top 0.34 excludes (c0, v1) and (c1, v0); a video anchor a and caption b read (b, a).
    # c0: v1 excluded -> v2 0.2: 0.2+0.2-0.9 < 0 -> 0
    # c1: v0 excluded -> v2 0.1: 0.2+0.1-0.7 < 0 -> 0
    # c2: max(0.3, 0.8) = 0.8: 0.2+0.8-0.4 = 0.6                 caption mean 0.6/3
    # v0: c1 excluded ((1, 0)) -> c2 0.3: 0.2+0.3-0.9 < 0 -> 0
    # v1: c0 excluded ((0, 1)) -> c2 0.8: 0.2+0.8-0.7 = 0.3
    # v2: max(0.2, 0.1) = 0.2: 0.2+0.2-0.4 = 0                     video mean 0.3/3
    # total 0.9 / 3 = 0.3 (hn: 1/3, because c1 -> v0 (0.6) no longer counts)
    loss = losses.build("hn_exclusion", exclude_top=0.34, scope="batch")
    assert loss(s3, text_sims=text).item() == pytest.approx(0.3, abs=1e-12)


def test_hn_exclusion_anchors_without_negatives_give_zero(s3):
    text = torch.tensor(TEXT, dtype=torch.float64)
    # floor(5.994) = 5 of 6 pairs excluded.
    loss = losses.build("hn_exclusion", exclude_top=0.999, scope="batch")
    # The smallest pairs (0, 2) and (2, 0) tie at 0.1; row-major order excludes (0, 2), so
    # (2, 0) is the only pair left. c0, c1, v1, v2 have no negative -> 0 each;
    # c2 -> v0 0.3: 0.2+0.3-0.4 = 0.1; v0 -> c2 0.3: 0.2+0.3-0.9 < 0 -> 0. Total 0.1 / 3.
    assert loss(s3, text_sims=text).item() == pytest.approx(0.1 / 3, abs=1e-12)


def test_hn_exclusion_with_nothing_excluded_is_hn():
    _, _, sims = random_batch(8, seed=6)
    text = torch.rand(8, 8, generator=torch.Generator().manual_seed(0), dtype=torch.float64)
    value = losses.build("hn_exclusion", exclude_top=0.0, scope="batch")(sims, text_sims=text)
    assert value.item() == pytest.approx(losses.build("hn")(sims).item(), abs=1e-12)


def test_dataset_threshold_hand_worked(s3):
    # One threshold for every batch (the paper's rule): 0.9 excludes (0, 1) 0.9 and (1, 0)
    # 0.95, the same pairs as the per-batch count 0.34 above, hence the same value 0.3.
    text = torch.tensor(TEXT, dtype=torch.float64)
    loss = losses.build("hn_exclusion", threshold=0.9)
    assert loss.excluded(text).nonzero().tolist() == [[0, 1], [1, 0]]
    assert loss(s3, text_sims=text).item() == pytest.approx(0.3, abs=1e-12)
    # The threshold does not adapt to the batch: 0.96 excludes nothing here -> hn.
    loose = losses.build("hn_exclusion", threshold=0.96)
    assert loose(s3, text_sims=text).item() == pytest.approx(losses.build("hn")(s3).item())


def test_dataset_scope_needs_a_threshold(s3):
    with pytest.raises(losses.LossInputError, match="needs `threshold`"):
        losses.build("hn_exclusion")(s3, text_sims=torch.eye(3, dtype=torch.float64))
    with pytest.raises(losses.LossConfigError, match="'dataset' or 'batch'"):
        losses.build("hn_exclusion", scope="epoch")


def test_top_fraction_threshold_matches_all_pairs_sorted():
    from rudder.text import CaptionSimilarity

    texts = ["cut the bottle", "cut a bottle", "glue the straw", "glue straws", "tie a thread",
             "cut the straw", "बाटली कापा", "बाटली कापली", "fold the card"]
    similarity = CaptionSimilarity().fit(texts)
    full = similarity.pairwise(texts).numpy()
    pairs = sorted((full[i, j] for i in range(9) for j in range(i + 1, 9)), reverse=True)
    for fraction in (0.05, 0.2, 0.5):
        count = int(fraction * 36)
        for rows in (2, 512):  # several blocks and one
            value = similarity.top_fraction_threshold(texts, fraction, block_rows=rows)
            assert value == pytest.approx(pairs[count - 1], abs=1e-6)
    assert similarity.top_fraction_threshold(texts, 0.01) == float("inf")  # floor(0.36) = 0


def test_top_fraction_threshold_is_sampled_past_exact_pairs_within_its_stated_bound():
    import math

    from rudder.text import CaptionSimilarity

    rng = np.random.default_rng(0)
    words = ["cut", "the", "bottle", "glue", "straw", "tie", "thread", "fold", "card", "paper",
             "बाटली", "कापा", "कागद", "दुमडा", "paint", "car"]
    texts = [" ".join(rng.choice(words, rng.integers(2, 6))) for _ in range(300)]
    similarity = CaptionSimilarity().fit(texts)
    full = similarity.pairwise(texts).numpy()[np.triu_indices(300, 1)]  # 44,850 pairs
    for fraction in (0.01, 0.05):
        exact = similarity.top_fraction_threshold(texts, fraction)
        assert exact == similarity.top_fraction_threshold(texts, fraction, exact_pairs=44_850)
        for seed in (0, 1):
            m = 20_000  # sampled: past exact_pairs
            value = similarity.top_fraction_threshold(texts, fraction, exact_pairs=44_849,
                                                      sampled_pairs=m, seed=seed)
            assert value == similarity.top_fraction_threshold(
                texts, fraction, exact_pairs=44_849, sampled_pairs=m, seed=seed)  # seeded
            bound = 4 * math.sqrt(fraction * (1 - fraction) / m) + 1 / m  # the docstring's
            above, at_or_above = (full > value + 1e-6).mean(), (full >= value - 1e-6).mean()
            assert above <= fraction + bound and at_or_above >= fraction - bound


def test_top_fraction_threshold_over_pairs_of_other_videos_only():
    # The paper's threshold comes from caption pairs inside training batches (one caption per
    # video): a direct loop over the pairs of captions of different videos, sorted.
    from rudder.text import CaptionSimilarity

    texts = ["cut the bottle", "cut a bottle", "glue the straw", "glue straws", "tie a thread",
             "cut the straw", "बाटली कापा", "बाटली कापली", "fold the card"]
    videos = [0, 0, 1, 1, 2, 3, 4, 4, 5]
    similarity = CaptionSimilarity().fit(texts)
    full = similarity.pairwise(texts).numpy()
    pairs = sorted((full[i, j] for i in range(9) for j in range(i + 1, 9)
                    if videos[i] != videos[j]), reverse=True)
    assert len(pairs) == 36 - 3
    for fraction in (0.1, 0.3):
        count = int(fraction * len(pairs))
        for rows in (2, 512):
            value = similarity.top_fraction_threshold(texts, fraction, block_rows=rows,
                                                      groups=videos)
            assert value == pytest.approx(pairs[count - 1], abs=1e-6)
    # the same-video pairs "cut the bottle"/"cut a bottle" are among the most similar of all
    assert similarity.top_fraction_threshold(texts, 0.05, groups=videos) < \
        similarity.top_fraction_threshold(texts, 0.05)
    with pytest.raises(ValueError, match="groups"):
        similarity.top_fraction_threshold(texts, 0.1, groups=videos[:3])


def test_the_sampled_threshold_over_pairs_of_other_videos_keeps_its_bound():
    import math

    from rudder.text import CaptionSimilarity

    rng = np.random.default_rng(1)
    words = ["cut", "the", "bottle", "glue", "straw", "tie", "thread", "fold", "card", "paper"]
    texts = [" ".join(rng.choice(words, rng.integers(2, 6))) for _ in range(200)]
    videos = np.repeat(np.arange(50), 4)  # four captions per video
    similarity = CaptionSimilarity().fit(texts)
    full = similarity.pairwise(texts).numpy()
    upper = np.triu(np.ones((200, 200), dtype=bool), 1) & (videos[:, None] != videos[None, :])
    other = full[upper]  # 19,900 - 50 * 6 = 19,600 pairs
    assert other.size == 19_600
    value = similarity.top_fraction_threshold(texts, 0.05, exact_pairs=100,
                                              sampled_pairs=20_000, groups=videos)
    m = 20_000 * 19_600 / 19_900  # about the sampled pairs of different videos
    bound = 4 * math.sqrt(0.05 * 0.95 / m) + 1 / m
    assert (other > value + 1e-6).mean() <= 0.05 + bound
    assert (other >= value - 1e-6).mean() >= 0.05 - bound
