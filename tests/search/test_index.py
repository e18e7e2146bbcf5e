"""rudder.search.index and rudder.search.index_cache: exact top-k search equal to the model's
similarity,
ties, the oneDNN and plain products, caching, faiss."""

import math
import sys
import threading

import numpy as np
import pytest
import torch

from rudder.data.card import Card
from rudder.data.layout import DatasetFolder, ExpertInfo, LayoutError
from rudder.models import CollaborativeExperts, ModelConfig
from rudder.search import index as index_module
from rudder.search import index_cache
from rudder.search.index import (
    SearchIndexError,
    SearchResult,
    VideoIndex,
    half_scan_pays,
)
from rudder.search.index_cache import load_or_build
from rudder.search.index_faiss import FaissSearch
from rudder.search.topk import chunk_topk, merge_topk

from ..factories import caption
from ..factories import write_dataset as write_tiny_dataset

EXPERTS = {"scene": ExpertInfo(10), "object": ExpertInfo(6), "audio@mr": ExpertInfo(4, True)}


@pytest.fixture(autouse=True)
def two_stage_everywhere(monkeypatch):
    """The two-stage search is tested on every machine, whatever ``half_scan_pays`` finds."""
    monkeypatch.setattr(index_module, "half_scan_pays", lambda: True)


def test_the_default_index_keeps_float16_copies_only_where_they_are_faster(monkeypatch):
    index, videos = small_index()
    assert index._half is not None
    monkeypatch.setattr(index_module, "half_scan_pays", lambda: False)
    plain, _ = small_index()
    assert plain._half is None  # the float32 scan, same results
    text, logits = videos[:1], torch.zeros(1, 2)
    assert torch.equal(plain.search(text, logits, k=5).indices,
                       index.search(text, logits, k=5).indices)
    with pytest.raises(SearchIndexError, match="not faster on this machine"):
        plain.approximate(text, torch.softmax(logits, -1))
    forced = VideoIndex(plain.video_ids, plain.experts, videos, plain.available, prefilter=True)
    assert forced._half is not None


def test_half_scan_pays_is_a_measurement_cached_per_process():
    assert isinstance(half_scan_pays(), bool)  # the function itself (the fixture patches the
    assert half_scan_pays.cache_info().currsize == 1  # module's name): measured once


def small_model(seed=0, vocab_size=40):
    torch.manual_seed(seed)
    config = ModelConfig(shared_dim=12, word_dim=8, text_vlad_clusters=2, video_vlad_clusters=2)
    return CollaborativeExperts(config, EXPERTS, vocab_size).eval()


def random_videos(n, seed=0):
    g = torch.Generator().manual_seed(seed)
    available = torch.rand(n, 3, generator=g) > 0.4
    available[~available.any(1), 1] = True
    features = {
        "scene": torch.randn(n, 10, generator=g),
        "object": torch.randn(n, 6, generator=g),
        "audio@mr": torch.randn(n, 3, 4, generator=g),
    }
    masks = {
        "audio@mr": torch.ones(n, 3, dtype=torch.bool) & available[:, :1]
    }  # audio@mr sorts first
    return features, masks, available


@pytest.fixture(scope="module")
def encoded():
    """Embeddings of 257 videos and 9 queries from a random model, plus the model's sims."""
    model = small_model()
    features, masks, available = random_videos(257)
    g = torch.Generator().manual_seed(1)
    tokens = torch.randint(2, 40, (9, 7), generator=g)
    mask = torch.ones(9, 7, dtype=torch.bool)
    mask[:, 5:] = False
    with torch.no_grad():
        videos = model.encode_video(features, masks, available)
        text, logits = model.encode_text(tokens, mask)
        sims = CollaborativeExperts.similarity(text, logits, videos, available)
    return videos, available, text, logits, sims, model.experts


def reference_topk(sims, k):
    """Stable sort: score descending, lower index first among ties."""
    order = torch.from_numpy(
        np.lexsort((np.arange(sims.shape[1])[None].repeat(len(sims), 0), -sims.numpy()), axis=1)
    )
    return order[:, :k]


def one_by_one(index, text, logits, k, **kwargs):
    """Search query by query (the two-stage path takes one query at a time)."""
    found = [
        index.search(text[i : i + 1], logits[i : i + 1], k=k, **kwargs) for i in range(len(text))
    ]
    return torch.cat([f.scores for f in found]), torch.cat([f.indices for f in found])


@pytest.mark.parametrize("chunk_size", [1, 16, 100, 257, 10_000])
def test_search_equals_model_similarity(encoded, chunk_size):
    videos, available, text, logits, sims, experts = encoded
    index = VideoIndex([f"v{i}" for i in range(len(videos))], experts, videos, available)
    expected = reference_topk(sims, 10)
    batch = index.search(text, logits, k=10, chunk_size=chunk_size)  # the float32 scan
    single = one_by_one(index, text, logits, 10, chunk_size=chunk_size)  # two stages
    for scores, indices in ((batch.scores, batch.indices), single):
        assert torch.equal(indices, expected)
        torch.testing.assert_close(scores, sims.gather(1, expected), rtol=0, atol=1e-6)
    torch.testing.assert_close(index.scores(text, logits), sims, rtol=0, atol=1e-6)


def test_hand_worked_scores_renormalise_over_available_experts():
    # Two experts, D = 2. Query t = ([1, 0], [1, 0]) with logits (ln 3, 0): w = (0.75, 0.25).
    # v0 has both experts:      (0.75 * 1 + 0.25 * 0) / 1       = 0.75
    # v1 has expert 0 only:     (0.75 * 0) / 0.75                = 0   (its expert-1 row is ignored)
    # v2 has expert 1 only:     (0.25 * 1) / 0.25                = 1
    videos = torch.tensor(
        [[[1.0, 0.0], [0.0, 1.0]], [[0.0, 1.0], [1.0, 0.0]], [[0.0, 1.0], [1.0, 0.0]]]
    )
    available = torch.tensor([[True, True], [True, False], [False, True]])
    text = torch.tensor([[[1.0, 0.0], [1.0, 0.0]]])
    logits = torch.tensor([[math.log(3.0), 0.0]])
    index = VideoIndex(["v0", "v1", "v2"], ["a", "b"], videos, available)
    found = index.search(text, logits, k=3)
    assert found.indices.tolist() == [[2, 0, 1]]
    torch.testing.assert_close(found.scores, torch.tensor([[1.0, 0.75, 0.0]]))
    reference = CollaborativeExperts.similarity(text, logits, videos, available)
    torch.testing.assert_close(reference, torch.tensor([[0.75, 0.0, 1.0]]))


@pytest.mark.parametrize("chunk_size", [1, 2, 3, 4, 50])
def test_ties_rank_lower_index_first_across_chunks(chunk_size):
    # Scores (one query): 0.5 at 1, 3, 5, 7 and 0.9 at 6; the rest 0.1.
    scores = torch.full((1, 9), 0.1)
    scores[0, [1, 3, 5, 7]] = 0.5
    scores[0, 6] = 0.9
    best = None
    for start in range(0, 9, chunk_size):
        found = chunk_topk(scores[:, start : start + chunk_size], 3, offset=start)
        best = found if best is None else merge_topk(best, found, 3)
    assert best[1].tolist() == [[6, 1, 3]]
    assert best[0].tolist() == [[pytest.approx(0.9), 0.5, 0.5]]


def test_tie_across_the_kth_place_takes_the_lowest_columns():
    # Row 0: 0.9 at 4, then 0.5 at 0, 2, 5, 7 for places 2..3: columns 0 and 2 win.
    # Row 1: no tie across the 3rd place (0.8, 0.7, 0.6 then 0.1s): topk alone decides.
    # Row 2: every score equal: the first three columns.
    scores = torch.tensor(
        [
            [0.5, 0.1, 0.5, 0.1, 0.9, 0.5, 0.1, 0.5],
            [0.1, 0.8, 0.1, 0.6, 0.1, 0.1, 0.7, 0.1],
            [0.3] * 8,
        ]
    )
    values, columns = chunk_topk(scores, 3, offset=10)
    assert columns.tolist() == [[14, 10, 12], [11, 16, 13], [10, 11, 12]]
    assert torch.equal(values, scores.gather(1, columns - 10))


def test_boundary_ties_equal_a_stable_sort_on_random_ties():
    g = torch.Generator().manual_seed(5)
    scores = torch.randint(0, 6, (200, 40), generator=g).float() / 4  # many exact ties
    for k in (1, 3, 10, 40):
        values, columns = chunk_topk(scores, k)
        assert torch.equal(columns, reference_topk(scores, k))
        assert torch.equal(values, scores.gather(1, columns))


@pytest.mark.parametrize("chunk_size", [7, 10_000])
def test_onednn_and_plain_products_rank_alike(encoded, monkeypatch, chunk_size):
    videos, available, text, logits, sims, experts = encoded
    ids = [f"v{i}" for i in range(len(videos))]
    found = {}
    for onednn in (True, False):
        if onednn and not index_module._onednn_available():
            continue
        monkeypatch.setattr(index_module, "USE_ONEDNN", onednn)
        index = VideoIndex(ids, experts, videos, available)
        found[onednn] = index.search(text, logits, k=10, chunk_size=chunk_size)
        assert index._packed[1][0][3][0][1].is_mkldnn == onednn
        assert torch.equal(found[onednn].indices, reference_topk(sims, 10))
    torch.testing.assert_close(found[False].scores, found.get(True, found[False]).scores)


def test_identical_videos_return_first_indices():
    # Entries 0.5 and weights 0.5 keep every product and sum exact in float32, so the
    # twelve scores are truly equal (with other values, matrix-product blocking can make
    # equal scores differ in the last bit).
    videos = torch.full((12, 2, 3), 0.5)
    index = VideoIndex(
        [str(i) for i in range(12)], ["a", "b"], videos, torch.ones(12, 2, dtype=torch.bool)
    )
    found = index.search(torch.ones(2, 2, 3), torch.zeros(2, 2), k=5, chunk_size=5)
    assert found.indices.tolist() == [[0, 1, 2, 3, 4]] * 2


def test_ties_across_availability_groups_rank_lower_index_first():
    # Even videos have both experts, odd ones only "a"; every per-expert product is 1.5, so
    # every score is 1.5 whatever the pattern: the top 4 are videos 0..3 for both queries,
    # although each group alone would give (0, 2, 4, ...) and (1, 3, 5, ...).
    available = torch.ones(8, 2, dtype=torch.bool)
    available[1::2, 1] = False
    index = VideoIndex(
        [str(i) for i in range(8)], ["a", "b"], torch.full((8, 2, 3), 0.5), available
    )
    found = index.search(torch.ones(2, 2, 3), torch.zeros(2, 2), k=4)
    assert found.indices.tolist() == [[0, 1, 2, 3]] * 2
    torch.testing.assert_close(found.scores, torch.full((2, 4), 1.5))


def test_faiss_search_gives_the_same_ranking(encoded):
    pytest.importorskip("faiss")
    videos, available, text, logits, _, experts = encoded
    index = VideoIndex([f"v{i}" for i in range(len(videos))], experts, videos, available)
    assert len(torch.unique(available, dim=0)) > 2  # several availability groups are merged
    for k in (1, 10, 257):
        expected = index.search(text, logits, k=k)
        found = FaissSearch(index, blas_threshold=1).search(text, logits, k=k)
        assert torch.equal(found.indices, expected.indices)
        torch.testing.assert_close(found.scores, expected.scores, rtol=0, atol=1e-5)


def test_query_of_another_model_is_rejected(encoded):
    videos, available, text, logits, _, experts = encoded
    index = VideoIndex([f"v{i}" for i in range(len(videos))], experts, videos, available)
    with pytest.raises(SearchIndexError, match="another model"):
        index.search(text[:, :, :5], logits, k=3)


def test_video_without_any_expert_is_rejected():
    with pytest.raises(SearchIndexError, match="at least one available expert"):
        VideoIndex(["a"], ["x"], torch.ones(1, 1, 2), torch.zeros(1, 1, dtype=torch.bool))


def test_save_load_roundtrip(tmp_path, encoded):
    videos, available, *_, experts = encoded
    index = VideoIndex([f"v{i}" for i in range(len(videos))], experts, videos, available, key="abc")
    index.save(tmp_path / "i.pt")
    loaded = VideoIndex.load(tmp_path / "i.pt")
    assert loaded.video_ids == index.video_ids and loaded.key == "abc" and loaded.experts == experts
    assert torch.equal(loaded.embeddings, index.embeddings) and torch.equal(
        loaded.available, available
    )


# ---------------------------------------------------------------- cache on disk
def write_dataset(path, experts=EXPERTS, n=14):
    rng = np.random.default_rng(0)
    ids = [f"v{i:02d}" for i in range(n)]
    rows = [caption(f"{v}-en", v, "en", f"make toy {i}", end=1.0) for i, v in enumerate(ids)]
    features = {
        name: (
            info,
            ids,
            [rng.normal(size=(2, info.dim)) for _ in ids]
            if info.variable_length
            else rng.normal(size=(n, info.dim)),
        )
        for name, info in experts.items()
    }
    splits = dict(zip(ids, ["train"] * (n - 4) + ["test"] * 4, strict=True))
    write_tiny_dataset(
        path,
        splits,
        rows,
        features,
        languages=["en"],
        name="index-test",
        duration=5.0,
        card=Card("t", "t"),
    )
    return DatasetFolder(path)


def test_index_is_cached_by_model_and_dataset(tmp_path, monkeypatch):
    from rudder.data.loader import build_vocabulary

    folder = write_dataset(tmp_path / "d")
    vocab = build_vocabulary(folder, ["en"])
    model = small_model(vocab_size=len(vocab))
    first = load_or_build(model, folder, cache_dir=tmp_path / "cache")
    assert len(first) == 14 and first.video_ids[:10] == [f"v{i:02d}" for i in range(10)]
    assert len(list((tmp_path / "cache").glob("*.pt"))) == 1

    def no_build(*args, **kwargs):
        raise AssertionError("the cached index should have been used")

    monkeypatch.setattr(index_cache, "build_index", no_build)
    again = load_or_build(model, folder, cache_dir=tmp_path / "cache")
    assert torch.equal(again.embeddings, first.embeddings)
    monkeypatch.undo()

    other = small_model(seed=1, vocab_size=len(vocab))  # new weights: a new key, rebuilt
    rebuilt = load_or_build(other, folder, cache_dir=tmp_path / "cache")
    assert rebuilt.key != first.key and not torch.equal(rebuilt.embeddings, first.embeddings)
    assert len(list((tmp_path / "cache").glob("*.pt"))) == 2
    with torch.no_grad():
        direct = other.encode_video(*_all_features(folder, other.experts))
    torch.testing.assert_close(rebuilt.embeddings, direct, rtol=0, atol=1e-6)


def _all_features(folder, experts):
    from rudder.data.loader import build_vocabulary, load_split

    vocab = build_vocabulary(folder, ["en"])
    parts = [load_split(folder, s, experts, vocab, ["en"]) for s in ("train", "test")]
    features = {e: torch.cat([p.features[e] for p in parts]) for e in experts}
    masks = {e: torch.cat([p.frame_masks[e] for p in parts]) for e in parts[0].frame_masks}
    return features, masks, torch.cat([p.available for p in parts])


def test_dataset_with_other_expert_dims_is_rejected(tmp_path):
    from rudder.data.loader import build_vocabulary

    folder = write_dataset(tmp_path / "d", {**EXPERTS, "scene": ExpertInfo(7)})
    vocab = build_vocabulary(folder, ["en"])
    with pytest.raises(LayoutError, match="'scene'"):
        load_or_build(small_model(vocab_size=len(vocab)), folder, cache_dir=tmp_path / "cache")


# ------------------------------------------------------------ two-stage search
def near_tie_index(n=3000, dim=64, seed=0):
    """Unit video rows that all score within ~1e-3 of each other for the query ``base``."""
    g = torch.Generator().manual_seed(seed)
    base = torch.nn.functional.normalize(torch.randn(3, dim, generator=g), dim=-1)
    videos = torch.nn.functional.normalize(
        base + 2e-3 * torch.randn(n, 3, dim, generator=g), dim=-1
    )
    available = torch.rand(n, 3, generator=g) > 0.3
    available[~available.any(1), 0] = True
    return VideoIndex([str(i) for i in range(n)], ["a", "b", "c"], videos, available), base


def test_stage_one_error_stays_within_its_bound(encoded):
    videos, available, text, logits, sims, experts = encoded
    index = VideoIndex([f"v{i}" for i in range(len(videos))], experts, videos, available)
    weights = torch.softmax(logits, dim=-1)
    for q in range(len(text)):
        approx, bound = index.approximate(text[q : q + 1], weights[q : q + 1])
        assert 0 < bound.item() < 0.01
        error = (approx[0] - sims[q]).abs()
        assert (error <= bound).all() and error.max() > 0  # approximate, within the bound
    with pytest.raises(SearchIndexError, match="one query"):
        index.approximate(text, weights)


@pytest.mark.parametrize("k", [1, 10, 100])
def test_two_stage_search_equals_float32_scan_on_near_ties(k):
    index, base = near_tie_index()
    g = torch.Generator().manual_seed(3)
    text = torch.nn.functional.normalize(base + 1e-3 * torch.randn(6, 3, 64, generator=g), dim=-1)
    logits = torch.randn(6, 3, generator=g)
    scan = index.search(text, logits, k=k, prefilter=False)
    two_stage = SearchResult(*one_by_one(index, text, logits, k))
    # Float64 truth: both results must be the true top k up to float32 rounding (~1e-7);
    # neighbours here are ~3e-7 apart, so the two float32 orders may swap such pairs.
    exact = CollaborativeExperts.similarity(
        text.double(), logits.double(), index.embeddings.double(), index.available
    )
    truth = exact.topk(k, dim=1).values
    for found in (scan, two_stage):
        torch.testing.assert_close(exact.gather(1, found.indices), truth, rtol=0, atol=1e-6)
    torch.testing.assert_close(two_stage.scores, scan.scores, rtol=0, atol=1e-6)
    spread = truth[:, 0] - truth[:, -1]
    assert (spread < 0.01).all()  # the top k really sits inside the stage-1 error window


def test_index_without_prefilter_still_searches(encoded):
    videos, available, text, logits, sims, experts = encoded
    index = VideoIndex(
        [f"v{i}" for i in range(len(videos))], experts, videos, available, prefilter=False
    )
    assert torch.equal(one_by_one(index, text, logits, 5)[1], reference_topk(sims, 5))
    with pytest.raises(SearchIndexError, match="prefilter=False"):
        index.approximate(text[:1], torch.softmax(logits[:1], -1))


def test_embeddings_too_large_for_float16_use_the_float32_scan(encoded):
    videos, available, text, logits, _, experts = encoded
    index = VideoIndex([f"v{i}" for i in range(len(videos))], experts, 1000 * videos, available)
    sims = CollaborativeExperts.similarity(text, logits, 1000 * videos, available)
    assert torch.equal(one_by_one(index, text, logits, 5)[1], reference_topk(sims, 5))


def test_concurrent_first_batch_searches_agree():
    # The first batch search builds the per-pattern groups; threads racing it must neither
    # see a partly built list nor leave one cached (it dropped or doubled whole groups).
    g = torch.Generator().manual_seed(0)
    videos = torch.randn(1000, 7, 2, generator=g)
    available = torch.rand(1000, 7, generator=g) > 0.5
    available[~available.any(1), 0] = True
    text, logits = videos[:4].clone(), torch.zeros(4, 7)
    ids, experts = [str(i) for i in range(1000)], list("abcdefg")
    sims = CollaborativeExperts.similarity(text, logits, videos, available)
    expected = reference_topk(sims, 10)
    interval = sys.getswitchinterval()
    sys.setswitchinterval(1e-6)  # switch threads often, so the threads interleave
    try:
        for _ in range(12):
            index = VideoIndex(ids, experts, videos, available, prefilter=False)
            found = [None] * 3

            def search(i, index=index, found=found):
                found[i] = index.search(text, logits, k=10).indices

            threads = [threading.Thread(target=search, args=(i,)) for i in range(3)]
            for thread in threads:
                thread.start()
            for thread in threads:
                thread.join()
            found.append(index.search(text, logits, k=10).indices)  # the cached groups
            assert all(torch.equal(f, expected) for f in found)
    finally:
        sys.setswitchinterval(interval)


def overflow_index(d=64):
    """Entries 40 (below HALF_SAFE) whose dot products over ``d`` reach 102400, past
    float16's 65504: video 0 scores about -101894 and video 1 scores 102400."""
    videos = torch.zeros(2, 2, d)
    videos[0, 0], videos[0, 1], videos[1, 1] = 40.0, -40.0, 40.0
    available = torch.tensor([[True, True], [False, True]])
    index = VideoIndex(["v0", "v1"], ["a", "b"], videos, available)
    return index, torch.full((1, 2, d), 40.0), torch.tensor([[-3.0, 3.0]])


def test_query_that_would_overflow_float16_uses_the_float32_scan():
    index, text, logits = overflow_index()
    assert index._half is not None  # the entries fit; the products do not
    found = index.search(text, logits, k=1)
    assert found.indices.tolist() == [[1]]
    torch.testing.assert_close(found.scores, torch.tensor([[102400.0]]))
    with pytest.raises(SearchIndexError, match="too large for float16"):
        index.approximate(text, torch.softmax(logits, -1))
    small = text / 8  # |t_e| max |v_e| = 40 * 320 = 12800: stage 1 stays in range
    approx, _ = index.approximate(small, torch.softmax(logits, -1))
    assert torch.isfinite(approx).all() and approx.argmax() == 1
    assert index.search(small, logits, k=2).indices.tolist() == [[1, 0]]


def test_non_finite_stage_one_scores_fall_back_to_the_float32_scan(encoded, monkeypatch):
    videos, available, text, logits, sims, experts = encoded
    index = VideoIndex([f"v{i}" for i in range(len(videos))], experts, videos, available)
    approx = torch.full((1, len(videos)), torch.nan)
    monkeypatch.setattr(index, "approximate", lambda *args: (approx, torch.zeros(1)))
    assert torch.equal(one_by_one(index, text, logits, 5)[1], reference_topk(sims, 5))


def small_index(n=20, seed=0, embeddings=None, ids=None):
    """``n`` unit videos over experts a and b, every third one without b."""
    g = torch.Generator().manual_seed(seed)
    videos = torch.nn.functional.normalize(torch.randn(n, 2, 4, generator=g), dim=-1)
    available = torch.ones(n, 2, dtype=torch.bool)
    available[::3, 1] = False
    videos = videos if embeddings is None else embeddings(videos)
    ids = [f"v{i}" for i in range(n)] if ids is None else ids
    return VideoIndex(ids, ["a", "b"], videos, available), videos


def test_empty_query_batch_gives_empty_results():
    index, _ = small_index()
    found = index.search(torch.zeros(0, 2, 4), torch.zeros(0, 2), k=3)
    assert found.scores.shape == found.indices.shape == (0, 3)
    assert index.scores(torch.zeros(0, 2, 4), torch.zeros(0, 2)).shape == (0, 20)


def test_empty_index_is_rejected():
    with pytest.raises(SearchIndexError, match="at least one video"):
        VideoIndex([], ["a", "b"], torch.zeros(0, 2, 4), torch.zeros(0, 2, dtype=torch.bool))


def test_repeated_video_ids_are_rejected():
    ids = [f"v{i}" for i in range(19)] + ["v4"]
    with pytest.raises(SearchIndexError, match="'v4' is repeated"):
        small_index(ids=ids)


@pytest.mark.parametrize("value", [math.nan, math.inf])
def test_non_finite_embeddings_of_available_experts_are_rejected(value):
    def spoil(videos):
        videos = videos.clone()
        videos[4, 1, 2] = value  # video 4 has expert b
        return videos

    with pytest.raises(SearchIndexError, match="video 'v4': its 'b' embedding is not finite"):
        small_index(embeddings=spoil)


def test_nan_in_a_missing_experts_row_is_ignored():
    def spoil(videos):
        videos = videos.clone()
        videos[3, 1] = math.nan  # video 3 lacks expert b
        return videos

    clean, videos = small_index()
    spoilt, _ = small_index(embeddings=spoil)
    text, logits = videos[:2], torch.zeros(2, 2)
    assert torch.equal(spoilt.scores(text, logits), clean.scores(text, logits))
    assert spoilt._half is not None  # the two-stage search stays on
    for found, expected in zip(
        (spoilt.search(text, logits, k=5), spoilt.search(text[:1], logits[:1], k=5)),
        (clean.search(text, logits, k=5), clean.search(text[:1], logits[:1], k=5)),
        strict=True,
    ):
        assert torch.equal(found.indices, expected.indices)


@pytest.mark.parametrize("batch", [1, 3])
def test_non_finite_queries_are_rejected_naming_the_row(batch):
    index, videos = small_index()
    text, logits = videos[:batch].clone(), torch.zeros(batch, 2)
    text[batch - 1, 0, 1] = math.nan
    with pytest.raises(SearchIndexError, match=f"query row {batch - 1}: .* not finite"):
        index.search(text, logits, k=3)
    logits[batch - 1, 1] = math.nan
    text[batch - 1, 0, 1] = 0.0
    with pytest.raises(SearchIndexError, match=f"query row {batch - 1}: .* not finite"):
        index.scores(text, logits)


@pytest.mark.parametrize("blas_threshold", [1, 1000])  # faiss's BLAS and direct paths
def test_faiss_breaks_ties_across_the_kth_place_like_the_exact_search(blas_threshold):
    pytest.importorskip("faiss")
    # Scores 0.9 at video 6, 0.5 at videos 1, 3, 5, 7 and 0.1 elsewhere: the top 3 are 6, 1, 3.
    videos = torch.full((9, 1, 1), 0.1)
    videos[[1, 3, 5, 7], 0, 0] = 0.5
    videos[6, 0, 0] = 0.9
    index = VideoIndex(
        [str(i) for i in range(9)], ["a"], videos, torch.ones(9, 1, dtype=torch.bool)
    )
    search = FaissSearch(index, blas_threshold=blas_threshold).search
    assert search(torch.ones(1, 1, 1), torch.zeros(1, 1), k=3).indices.tolist() == [[6, 1, 3]]
    # Many exact ties (entries in halves, weights 1/2) over several availability groups.
    g = torch.Generator().manual_seed(0)
    videos = torch.randint(-2, 3, (300, 2, 3), generator=g) / 2
    available = torch.rand(300, 2, generator=g) > 0.3
    available[~available.any(1), 0] = True
    text = torch.randint(-2, 3, (30, 2, 3), generator=g) / 2
    index = VideoIndex([str(i) for i in range(300)], ["a", "b"], videos, available)
    search = FaissSearch(index, blas_threshold=blas_threshold).search
    for k in (1, 3, 10, 40):
        expected = index.search(text, torch.zeros(30, 2), k=k)
        found = search(text, torch.zeros(30, 2), k=k)
        assert torch.equal(found.indices, expected.indices)
        assert torch.equal(found.scores, expected.scores)


def test_faiss_checks_k_and_takes_an_empty_batch():
    pytest.importorskip("faiss")
    index, videos = small_index()
    search = FaissSearch(index).search
    with pytest.raises(SearchIndexError, match="k must be at least 1, got 0"):
        search(videos[:1], torch.zeros(1, 2), k=0)
    found = search(torch.zeros(0, 2, 4), torch.zeros(0, 2), k=3)
    assert found.scores.shape == found.indices.shape == (0, 3)


@pytest.mark.parametrize("damage", ["truncate", "not_an_index"])
def test_unreadable_cache_entry_is_rebuilt_with_a_warning(tmp_path, caplog, monkeypatch, damage):
    import logging

    from rudder.data.loader import build_vocabulary

    # a training run earlier in the session stops "rudder" records at its own handlers
    monkeypatch.setattr(logging.getLogger("rudder"), "propagate", True)

    folder = write_dataset(tmp_path / "d")
    model = small_model(vocab_size=len(build_vocabulary(folder, ["en"])))
    first = load_or_build(model, folder, cache_dir=tmp_path / "cache")
    [path] = (tmp_path / "cache").glob("*.pt")
    if damage == "truncate":
        path.write_bytes(path.read_bytes()[:500])
    else:
        torch.save([1, 2], path)
    with caplog.at_level("WARNING", logger="rudder.search.index_cache"):
        again = load_or_build(model, folder, cache_dir=tmp_path / "cache")
    assert "rebuilding it" in caplog.text and str(path) in caplog.text
    assert torch.equal(again.embeddings, first.embeddings)
    assert torch.equal(VideoIndex.load(path).embeddings, first.embeddings)  # written anew
