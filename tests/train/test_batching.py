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
    pairs = [(v, s) for vids, slots in batches for v, s in zip(vids.tolist(), slots.tolist())]
    assert sorted(pairs) == sorted(map(tuple, torch.nonzero(mask).tolist()))
    for vids, _ in batches:
        assert len(set(vids.tolist())) == len(vids)


def test_order_depends_only_on_the_generator():
    mask = _mask()
    a = epoch_batches(mask, 2, torch.Generator().manual_seed(5), "all")
    b = epoch_batches(mask, 2, torch.Generator().manual_seed(5), "all")
    assert all(torch.equal(x[0], y[0]) and torch.equal(x[1], y[1]) for x, y in zip(a, b))


def test_a_lone_leftover_video_joins_the_previous_batch():
    mask = torch.ones(5, 1, dtype=torch.bool)
    batches = epoch_batches(mask, 2, torch.Generator().manual_seed(0), "random")
    assert [len(b[0]) for b in batches] == [2, 3]
    assert epoch_batches(torch.ones(1, 1, dtype=torch.bool), 2, torch.Generator(), "random") == []
