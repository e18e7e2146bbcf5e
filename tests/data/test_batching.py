import torch

from rudder.data.batching import epoch_batches


def _mask():
    # video 0: 3 captions, video 1: 1, video 2: none, videos 3-6: 2 each
    mask = torch.zeros(7, 3, dtype=torch.bool)
    mask[0] = True
    mask[1, 0] = True
    mask[3:, :2] = True
    return mask


def test_random_mode_one_valid_caption_per_video():
    mask = _mask()
    batches = epoch_batches(mask, 3, torch.Generator().manual_seed(0), "random")
    videos = torch.cat([b[0] for b in batches])
    assert sorted(videos.tolist()) == [0, 1, 3, 4, 5, 6]  # video 2 has no caption
    for vids, slots in batches:
        assert len(set(vids.tolist())) == len(vids)
        assert mask[vids, slots].all()


def test_all_mode_visits_every_caption_once_without_repeating_a_video_in_a_batch():
    mask = _mask()
    mask[4] = True  # two videos with a third caption, so the last round is a real batch
    batches = epoch_batches(mask, 4, torch.Generator().manual_seed(1), "all")
    pairs = [(v, s) for vids, slots in batches
             for v, s in zip(vids.tolist(), slots.tolist(), strict=True)]
    assert sorted(pairs) == sorted(map(tuple, torch.nonzero(mask).tolist()))
    for vids, _ in batches:
        assert len(set(vids.tolist())) == len(vids)


def test_all_mode_places_the_captions_of_a_video_richer_than_the_others():
    """Video 0's third caption is alone in its round: it joins an earlier batch without
    video 0 (it was never visited); with one batch per round there is none to join."""
    mask = _mask()  # video 0 alone has a third caption
    for seed in range(5):
        batches = epoch_batches(mask, 2, torch.Generator().manual_seed(seed), "all")
        pairs = [(v, s) for vids, slots in batches
                 for v, s in zip(vids.tolist(), slots.tolist(), strict=True)]
        assert sorted(pairs) == sorted(map(tuple, torch.nonzero(mask).tolist()))
        assert all(len(set(vids.tolist())) == len(vids) for vids, _ in batches)
    one_batch_a_round = epoch_batches(mask, 10, torch.Generator().manual_seed(0), "all")
    assert sum(len(vids) for vids, _ in one_batch_a_round) == int(mask.sum()) - 1


def test_order_depends_only_on_the_generator():
    mask = _mask()
    a = epoch_batches(mask, 2, torch.Generator().manual_seed(5), "all")
    b = epoch_batches(mask, 2, torch.Generator().manual_seed(5), "all")
    assert all(torch.equal(x[0], y[0]) and torch.equal(x[1], y[1])
               for x, y in zip(a, b, strict=True))


def test_a_lone_leftover_video_joins_the_previous_batch():
    mask = torch.ones(5, 1, dtype=torch.bool)
    batches = epoch_batches(mask, 2, torch.Generator().manual_seed(0), "random")
    assert [len(b[0]) for b in batches] == [2, 3]
    assert epoch_batches(torch.ones(1, 1, dtype=torch.bool), 2, torch.Generator(), "random") == []


def test_relation_aware_batches_keep_annotated_pairs_together():
    mask = torch.ones(40, 3, dtype=torch.bool)
    mask[39] = False  # a video without caption never shows up, even in a pair
    # Video-disjoint pairs 0-1, 2-3, ..., plus pairs that compete for videos 0 and 2.
    pairs = [[v, 2, v + 1, 1] for v in range(0, 30, 2)] + [[0, 0, 2, 0], [4, 1, 39, 0]]
    batches = epoch_batches(mask, 7, torch.Generator().manual_seed(3), "random",
                            pairs=torch.tensor(pairs))
    placed = {}
    for index, (vids, slots) in enumerate(batches):
        assert len(vids) <= 6  # batch size rounded down to an even number
        assert len(set(vids.tolist())) == len(vids)
        for v, s in zip(vids.tolist(), slots.tolist(), strict=True):
            placed[v] = (index, s)
    assert sorted(placed) == list(range(39))
    together = [p for p in pairs if p[2] != 39 and placed[p[0]] == (placed[p[2]][0], p[1])
                and placed[p[2]][1] == p[3]]
    assert len(together) >= 14  # a maximal disjoint set: at most one of 0-1/2-3 lost to 0-2
    # Without pairs, these specific slots meet in one batch only by chance.
    plain = epoch_batches(mask, 6, torch.Generator().manual_seed(3), "random")
    batch_of = {v: (i, s) for i, (vids, slots) in enumerate(plain)
                for v, s in zip(vids.tolist(), slots.tolist(), strict=True)}
    by_chance = [p for p in pairs[:15] if batch_of[p[0]] == (batch_of[p[2]][0], p[1])
                 and batch_of[p[2]][1] == p[3]]
    assert len(by_chance) < len(together)


def test_relation_aware_batches_reject_bad_input():
    import pytest

    mask = torch.ones(4, 2, dtype=torch.bool)
    with pytest.raises(ValueError, match="two captions of one video"):
        epoch_batches(mask, 2, torch.Generator(), "random", pairs=torch.tensor([[1, 0, 1, 1]]))
    with pytest.raises(ValueError, match="need caption sampling 'random'"):
        epoch_batches(mask, 2, torch.Generator(), "all", pairs=torch.tensor([[0, 0, 1, 1]]))


def test_drawn_pinning_keeps_pairs_only_through_a_uniform_draw():
    # Hand-worked on the draws of plain `random` batches of the same generator (the paired
    # sampler draws every video's slot first, consuming the generator the same way).
    mask = torch.ones(8, 3, dtype=torch.bool)
    mask[0, 1:] = mask[4, 1:] = False  # videos 0 and 4 always draw slot 0
    plain = epoch_batches(mask, 8, torch.Generator().manual_seed(5), "random")
    drawn = dict(zip(plain[0][0].tolist(), plain[0][1].tolist(), strict=True))
    other = {v: (drawn[v] + 1) % 3 for v in drawn}  # a slot each video did not draw
    pairs = torch.tensor([
        [0, 0, 1, other[1]],         # video 0's only caption is its draw: kept, 1 pinned
        [2, drawn[2], 3, other[3]],  # video 2 drew its caption: kept, 3 pinned
        [6, other[6], 7, other[7]],  # neither video drew its caption: not kept
    ])
    batches = epoch_batches(mask, 8, torch.Generator().manual_seed(5), "random", pairs=pairs,
                            pinning="drawn")
    placed = {v: (i, s) for i, (vids, slots) in enumerate(batches)
              for v, s in zip(vids.tolist(), slots.tolist(), strict=True)}
    slots = {v: s for v, (_, s) in placed.items()}
    assert slots == {**drawn, 1: other[1], 3: other[3]}
    assert placed[0][0] == placed[1][0] and placed[2][0] == placed[3][0]
    # The default pins both captions of every pair it keeps, draws or not.
    both = epoch_batches(mask, 8, torch.Generator().manual_seed(5), "random", pairs=pairs)
    pinned = {v: s for vids, ss in both for v, s in zip(vids.tolist(), ss.tolist(), strict=True)}
    assert (pinned[6], pinned[7]) == (other[6], other[7])


def test_relation_share_caps_the_videos_in_kept_pairs():
    mask = torch.zeros(40, 3, dtype=torch.bool)
    mask[::2, 0] = True  # even videos: one caption, always drawn, so every pair is eligible
    mask[1::2] = True
    plain = epoch_batches(mask, 40, torch.Generator().manual_seed(1), "random")
    drawn = dict(zip(plain[0][0].tolist(), plain[0][1].tolist(), strict=True))
    pairs = torch.tensor([[v, 0, v + 1, (drawn[v + 1] + 1) % 3] for v in range(0, 40, 2)])
    for share, most in ((1.0, 20), (0.5, 10), (0.1, 2), (0.01, 0)):
        batches = epoch_batches(mask, 40, torch.Generator().manual_seed(1), "random",
                                pairs=pairs, pinning="drawn", share=share)
        slots = {v: s for vids, ss in batches for v, s in zip(vids.tolist(), ss.tolist(),
                                                               strict=True)}
        assert sum(slots[v] != drawn[v] for v in slots) == most  # floor(share * 40 / 2)
