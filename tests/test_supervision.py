"""rudder.supervision on hand-worked class sets."""

import itertools

import numpy as np
import pyarrow as pa
import pytest
import torch

from rudder import supervision
from rudder.data.classes import ClassIndex, video_class_sets
from rudder.supervision import (
    RelationTable,
    batch_labels,
    batch_relevance,
    partial_labels,
    relevance,
)

# Falcon et al. (ICIP 2022), Fig. 1: sunflower and helianthus are one class, "pick up" and
# "pick" one verb class.
FALCON_NOUNS = [
    ["n:flowerpot", "n:sunflower"],  # x1 pick up a flowerpot and a sunflower
    ["n:sunflower", "n:flowerpot"],  # x2 pick an helianthus and a flowerpot
    ["n:lily", "n:flowerpot"],  # x3 pot the lily in a flowerpot
    ["n:cake", "n:oven"],  # x4 put the cake in the oven
]
FALCON_VERBS = [["v:pick"], ["v:pick"], ["v:pot"], ["v:put"]]


def sets(nouns, verbs, noun_index=None, verb_index=None):
    noun_index = noun_index or ClassIndex.build(nouns)
    verb_index = verb_index or ClassIndex.build(verbs)
    return noun_index.multi_hot(nouns), verb_index.multi_hot(verbs)


def reference_relevance(nouns_a, verbs_a, nouns_b, verbs_b):
    """The reference R (EPIC-100 MIR, aranciokov/ranp) pair by pair with Python sets:
    0.5 * (IoU_verb + IoU_noun), an empty union giving IoU 0."""

    def jaccard(x, y):
        return len(x & y) / len(x | y) if x | y else 0.0

    out = np.zeros((len(nouns_a), len(nouns_b)))
    for i, j in itertools.product(range(len(nouns_a)), range(len(nouns_b))):
        parts = [
            jaccard(set(nouns_a[i]), set(nouns_b[j])),
            jaccard(set(verbs_a[i]), set(verbs_b[j])),
        ]
        out[i, j] = 0.5 * sum(parts)
    return out


def test_falcon_example():
    nouns, verbs = sets(FALCON_NOUNS, FALCON_VERBS)
    r = relevance(nouns, verbs, nouns, verbs)
    assert r.dtype == torch.float32 and r.shape == (4, 4)
    assert r[0, 1] == 1.0
    assert r[0, 2] == pytest.approx(0.5 * (0 + 1 / 3))  # verbs 0, nouns {flowerpot} / 3
    assert r[0, 3] == 0.0
    assert torch.equal(r, r.T)
    assert torch.equal(torch.diagonal(r), torch.ones(4))


def test_empty_parts_of_speech():
    nouns_a = [["bottle", "straw"], ["bottle"], [], []]  # listing, listing, verb only, nothing
    verbs_a = [[], [], ["cut"], []]
    nouns_b = [["bottle", "straw"], ["bottle", "straw"], [], ["bottle"]]
    verbs_b = [["cut"], [], ["cut", "glue"], []]
    index_n = ClassIndex.build(nouns_a, nouns_b)
    index_v = ClassIndex.build(verbs_a, verbs_b)
    r = relevance(
        index_n.multi_hot(nouns_a),
        index_v.multi_hot(verbs_a),
        index_n.multi_hot(nouns_b),
        index_v.multi_hot(verbs_b),
    )
    # Listing caption vs describing caption: verbs empty on one side only -> Jaccard 0 counts.
    assert r[0, 0] == pytest.approx(0.5)
    # Verbs empty on both sides count 0 (the reference code): at most 0.5, even for the
    # same nouns (the old rule, leaving the part out, gave 1.0, 0.5 and 1.0).
    assert r[0, 1] == 0.5 and r[1, 1] == pytest.approx(0.25) and r[1, 3] == 0.5
    # Nouns empty on both sides count 0: 0.5 * verb IoU (1/2).
    assert r[2, 2] == pytest.approx(0.25)
    # Both parts empty on both sides -> 0; empty on one side only -> 0 too.
    empty = torch.zeros(1, len(index_n)), torch.zeros(1, len(index_v))
    assert relevance(*empty, *empty).item() == 0.0
    assert torch.all(r[3] == 0.0)
    torch.testing.assert_close(
        r,
        torch.tensor(reference_relevance(nouns_a, verbs_a, nouns_b, verbs_b), dtype=torch.float32),
    )


def test_cross_language_concept_ids():
    # A Marathi caption ("बाटली कापा आणि स्ट्रॉ चिकटवा") and an English one ("cut the bottle
    # and glue the straw"): different lemmas, the same concept ids.
    nouns = [["c:bottle", "c:straw"], ["c:straw", "c:bottle"], ["c:magnet"]]
    verbs = [["c:cut", "c:glue"], ["c:glue", "c:cut"], ["c:cut"]]
    n, v = sets(nouns, verbs)
    r = relevance(n[:1], v[:1], n[1:], v[1:])
    assert r[0, 0] == 1.0
    assert r[0, 1] == pytest.approx(0.5 * (0 + 1 / 2))


def test_relevance_matches_reference_over_blocks(monkeypatch):
    rng = np.random.default_rng(0)
    nouns_pool, verbs_pool = [f"n{i}" for i in range(6)], [f"v{i}" for i in range(3)]

    def draw(pool, low, high, n):
        return [
            list(rng.choice(pool, rng.integers(low, high + 1), replace=False)) for _ in range(n)
        ]

    nouns_a, verbs_a = draw(nouns_pool, 0, 3, 23), draw(verbs_pool, 0, 2, 23)
    nouns_b, verbs_b = draw(nouns_pool, 0, 3, 17), draw(verbs_pool, 0, 2, 17)
    index_n, index_v = ClassIndex(nouns_pool), ClassIndex(verbs_pool)
    args = (
        index_n.multi_hot(nouns_a),
        index_v.multi_hot(verbs_a),
        index_n.multi_hot(nouns_b),
        index_v.multi_hot(verbs_b),
    )
    expected = torch.tensor(
        reference_relevance(nouns_a, verbs_a, nouns_b, verbs_b), dtype=torch.float32
    )
    torch.testing.assert_close(relevance(*args), expected)
    monkeypatch.setattr(supervision, "_BLOCK_ELEMENTS", 40)  # 2 rows per block, last one short
    torch.testing.assert_close(relevance(*args), expected)


def test_relevance_input_errors():
    n, v = torch.ones(2, 3), torch.ones(2, 2)
    with pytest.raises(ValueError, match="nouns_a has 3 classes but nouns_b has 4"):
        relevance(n, v, torch.ones(2, 4), v)
    with pytest.raises(ValueError, match="nouns_a has 2 rows but verbs_a has 3"):
        relevance(n, torch.ones(3, 2), n, v)
    with pytest.raises(ValueError, match="multi-hot matrix"):
        relevance(torch.ones(3), v, n, v)


def test_batch_relevance_caption_to_video():
    nouns, verbs = sets(FALCON_NOUNS, FALCON_VERBS)
    video_nouns = nouns[[1, 0, 3, 2]]  # video j is described by caption (x2, x1, x4, x3)[j]
    r = batch_relevance(nouns, verbs, video_nouns, verbs[[1, 0, 3, 2]])
    assert r[0, 0] == 1.0 and r[2, 3] == 1.0 and r[2, 2] == 0.0
    assert r[0, 3] == pytest.approx(1 / 6)
    with pytest.raises(ValueError, match="3 captions but 4 videos"):
        batch_relevance(nouns[:3], verbs[:3], nouns, verbs)


def test_class_index():
    index = ClassIndex.build([["b", "a"], None, []], [["c", "a"]])
    assert index.ids == ["a", "b", "c"] and len(index) == 3 and "b" in index
    hot = index.multi_hot([["c", "c"], None, ["zzz", "a"], []])
    assert hot.dtype == torch.float32
    assert hot.tolist() == [[0, 0, 1], [0, 0, 0], [1, 0, 0], [0, 0, 0]]
    with pytest.raises(KeyError, match="row 2: unknown concept id 'zzz'"):
        index.multi_hot([["a"], [], ["zzz"]], strict=True)
    with pytest.raises(TypeError, match="row 0 is a str"):
        index.multi_hot(["a"])
    assert ClassIndex.from_dict(index.to_dict()).ids == index.ids
    with pytest.raises(ValueError, match="duplicate"):
        ClassIndex(["a", "a"])


def test_video_class_sets_rho():
    index = ClassIndex(["bottle", "straw", "magnet", "glue"])
    captions = index.multi_hot(
        [
            ["bottle", "straw"],
            ["bottle"],
            ["bottle"],
            ["magnet"],  # video 0: 4 captions
            ["glue"],  # video 2: 1 caption; video 1 has none
        ]
    )
    video = torch.tensor([0, 0, 0, 0, 2])
    at_quarter = video_class_sets(captions, video, 3)  # default rho = 0.25: 1 of 4 suffices
    assert at_quarter.tolist() == [[1, 1, 1, 0], [0, 0, 0, 0], [0, 0, 0, 1]]
    assert video_class_sets(captions, video, 3, rho=0.3).tolist()[0] == [1, 0, 0, 0]
    assert video_class_sets(captions, video, 3, rho=0.75).tolist()[0] == [1, 0, 0, 0]
    assert video_class_sets(captions, video, 3, rho=0.76).tolist()[0] == [0, 0, 0, 0]
    # 3 of 10 captions at rho = 0.3: the float boundary (0.3 * 10 != 3 in binary) is reached.
    ten = index.multi_hot([["straw"]] * 3 + [["bottle"]] * 7)
    assert video_class_sets(ten, torch.zeros(10, dtype=torch.long), 1, rho=0.3).tolist() == [
        [1, 1, 0, 0]
    ]
    with pytest.raises(ValueError, match="rho must be in"):
        video_class_sets(captions, video, 3, rho=0.0)
    with pytest.raises(ValueError, match=r"values must be in \[0, 2\)"):
        video_class_sets(captions, video, 2)


def labels_of(nouns_q, verbs_q, nouns_c, verbs_c, alpha_n, alpha_v):
    index_n = ClassIndex.build(nouns_q, nouns_c)
    index_v = ClassIndex.build(verbs_q, verbs_c)
    return partial_labels(
        index_n.multi_hot(nouns_q),
        index_v.multi_hot(verbs_q),
        index_n.multi_hot(nouns_c),
        index_v.multi_hot(verbs_c),
        alpha_n,
        alpha_v,
    )


def test_partial_labels_alpha_boundaries():
    query_n, query_v = [["a", "b", "c", "d"]], [["x", "y"]]
    cand_n = [
        ["a", "b", "c", "d", "e"],
        ["a", "b"],
        ["a", "b", "c"],
        ["a"],
        ["e"],
        ["a", "b", "c", "d"],
    ]
    cand_v = [["x", "y"], [], [], ["x"], ["x", "y"], ["x"]]
    labels = labels_of(query_n, query_v, cand_n, cand_v, alpha_n=0.5, alpha_v=0.75)
    assert labels.dtype == torch.int8
    # superset -> positive; 2/4 nouns = alpha_n -> partial; 3/4 -> partial; 1/4 nouns and
    # 1/2 verbs -> negative; verbs 2/2 -> partial (not positive: nouns 0/4); nouns 4/4 but
    # verbs 1/2 -> partial, not positive.
    assert labels.tolist() == [[2, 1, 1, 0, 1, 1]]
    assert labels_of(query_n, query_v, cand_n, cand_v, 0.51, 0.5).tolist() == [[2, 0, 1, 1, 1, 1]]
    assert labels_of(query_n, query_v, cand_n, cand_v, 1.0, 1.0).tolist() == [[2, 0, 0, 0, 1, 1]]
    # alpha 0: any shared class is partial; a pair sharing none stays negative (no overlap)
    assert labels_of([["a", "b"]], [["x"]], [["b"], ["c"], []], [["y"], ["y"], ["x"]],
                     0.0, 0.0).tolist() == [[1, 0, 1]]


def test_partial_labels_parts_present_in_query():
    cand_n, cand_v = [["a"], ["a"], ["b"], []], [["x"], [], ["x"], []]
    # Listing query (nouns only): verbs of the candidate are irrelevant.
    assert labels_of([["a"]], [[]], cand_n, cand_v, 0.5, 0.5).tolist() == [[2, 2, 0, 0]]
    # Verb-only query: alpha_v decides, nouns are irrelevant.
    assert labels_of([[]], [["x"]], cand_n, cand_v, 0.5, 0.5).tolist() == [[2, 0, 2, 0]]
    # A query with neither nouns nor verbs has only negatives, even with alpha = 0.
    assert labels_of([[]], [[]], cand_n, cand_v, 0.0, 0.0).tolist() == [[0, 0, 0, 0]]
    with pytest.raises(ValueError, match="alpha_n must be in"):
        labels_of([["a"]], [[]], cand_n, cand_v, 1.5, 0.5)


def test_batch_labels_diagonal_and_manual_override():
    nouns, verbs = sets(FALCON_NOUNS, FALCON_VERBS)
    heuristic = batch_labels(nouns, verbs, alpha_n=0.5, alpha_v=0.5)
    assert heuristic.tolist() == [[2, 2, 1, 0], [2, 2, 1, 0], [1, 1, 2, 0], [0, 0, 0, 2]]
    manual = torch.full((4, 4), -1, dtype=torch.int8)
    manual[0, 1] = 0  # an annotator says x2 is not a match for x1 after all
    manual[3, 2] = 3  # description
    manual[1, 1] = 0  # the diagonal stays 2
    labels = batch_labels(nouns, verbs, 0.5, 0.5, manual=manual)
    assert labels.tolist() == [[2, 0, 1, 0], [2, 2, 1, 0], [1, 1, 2, 0], [0, 0, 3, 2]]
    # A batch caption with no class at all still has its own video as positive.
    empty = torch.zeros(2, 3)
    assert batch_labels(empty, empty, 0.5, 0.5).tolist() == [[2, 0], [0, 2]]
    with pytest.raises(ValueError, match="manual has shape"):
        batch_labels(nouns, verbs, 0.5, 0.5, manual=manual[:3])
    with pytest.raises(ValueError, match="-1 .unknown. or 0..3"):
        batch_labels(nouns, verbs, 0.5, 0.5, manual=manual.fill_(4))


def test_description_pairs_listing_and_describing():
    # c0 lists bottle, straw, card; c1 describes cutting the bottle (subset: marked);
    # c2 describes gluing bottle and magnet (not a subset); c3 is another listing;
    # c4 describes with no noun (never marked); c5 describes the straw, kind unknown to the rule.
    nouns = [["b", "s", "c"], ["b"], ["b", "m"], ["s"], [], ["s"]]
    kinds = ["listing", "describing", "describing", "listing", "describing", "other"]
    index = ClassIndex.build(nouns)
    marked = supervision.description_pairs(kinds, index.multi_hot(nouns))
    expected = torch.zeros(6, 6, dtype=torch.bool)
    for a, b in ((0, 1),):  # c3 lists only the straw: c1 (bottle) is not under it
        expected[a, b] = expected[b, a] = True
    assert torch.equal(marked, expected)
    with pytest.raises(ValueError, match="2 kinds but 6 noun rows"):
        supervision.description_pairs(kinds[:2], index.multi_hot(nouns))


def test_batch_labels_description_marks_only_non_positives():
    nouns, verbs = sets(FALCON_NOUNS, FALCON_VERBS)
    description = torch.zeros(4, 4, dtype=torch.bool)
    description[0, 1] = description[0, 2] = description[3, 0] = description[2, 2] = True
    manual = torch.full((4, 4), -1, dtype=torch.int8)
    manual[3, 0] = 1  # a manual relation wins over the description heuristic
    labels = batch_labels(nouns, verbs, 0.5, 0.5, manual=manual, description=description)
    # heuristic [[2, 2, 1, 0], [2, 2, 1, 0], [1, 1, 2, 0], [0, 0, 0, 2]]
    assert labels.tolist() == [[2, 2, 3, 0], [2, 2, 1, 0], [1, 1, 2, 0], [1, 0, 0, 2]]
    with pytest.raises(ValueError, match="description has shape"):
        batch_labels(nouns, verbs, 0.5, 0.5, description=description[:2])


def relations(rows):
    a, b, label = zip(*rows, strict=True)
    return pa.table(
        {
            "caption_id_a": list(a),
            "caption_id_b": list(b),
            "label": pa.array(label, pa.int8()),
            "annotator": ["ann"] * len(rows),
        }
    )


def test_relation_table_symmetry_and_unknown():
    ids = ["c0", "c1", "c2", "c3"]
    table = RelationTable(
        ids,
        relations(
            [("c0", "c1", 2), ("c2", "c0", 1), ("c3", "c1", 3), ("c1", "c0", 2), ("c9", "c0", 0)]
        ),
    )
    assert len(table) == 4 and table.skipped == 1  # c9 is in another split
    full = table.lookup(ids)
    assert full.dtype == torch.int8
    assert full.tolist() == [[-1, 2, 1, -1], [2, -1, -1, 3], [1, -1, -1, -1], [-1, 3, -1, -1]]
    assert torch.equal(full, full.T)
    assert table.lookup(["c1", "zz"], ["c3", "c0", "zz"]).tolist() == [[3, 2, -1], [-1, -1, -1]]
    assert table.lookup_positions(np.array([2]), np.array([0, 3])).tolist() == [[1, -1]]
    low, high = table.pairs()  # c0-c1 is listed both ways but is one pair
    assert list(zip(low.tolist(), high.tolist(), strict=True)) == [(0, 1), (0, 2), (1, 3)]


def test_relation_table_reads_each_direction_of_an_asymmetric_pair():
    # RUDDER's heuristics are relative to the query: c1 is partial for c0, c0 positive for c1
    ids = ["c0", "c1", "c2"]
    table = RelationTable(ids, relations([("c0", "c1", 1), ("c1", "c0", 2), ("c2", "c0", 3)]))
    assert table.lookup(ids).tolist() == [[-1, 1, 3], [2, -1, -1], [3, -1, -1]]
    assert table.lookup(["c1"], ["c0", "c2"]).tolist() == [[2, -1]]
    low, high = table.pairs()
    assert list(zip(low.tolist(), high.tolist(), strict=True)) == [(0, 1), (0, 2)]


def test_relation_table_errors():
    with pytest.raises(ValueError, match=r"relations/all.parquet\) gives the pair \(query c1, "
                       r"candidate c0\) different labels: row 2 \(ann\) label 1 and row 0 "
                       r"\(ann\) label 2; .*import-relations --resolve"):
        RelationTable(["c0", "c1"], relations([("c1", "c0", 2), ("c0", "c1", 1), ("c1", "c0", 1)]))
    with pytest.raises(ValueError, match=r"row 1: label 5 not in 0..3"):
        RelationTable(["c0", "c1"], relations([("c0", "c1", 2), ("c1", "c0", 5)]))
    with pytest.raises(ValueError, match="lacks column.*'label'"):
        RelationTable(["c0"], pa.table({"caption_id_a": ["c0"], "caption_id_b": ["c0"]}))
    with pytest.raises(ValueError, match="duplicates"):
        RelationTable(["c0", "c0"], relations([("c0", "c0", 2)]))
    empty = RelationTable(["c0", "c1"], relations([("x", "y", 2)]))
    assert empty.lookup(["c0", "c1"]).tolist() == [[-1, -1], [-1, -1]]


def test_batch_relevance_equals_the_sparse_relevance():
    generator = torch.Generator().manual_seed(3)
    nouns = (torch.rand(40, 12, generator=generator) < 0.2).float()
    verbs = (torch.rand(40, 5, generator=generator) < 0.15).float()  # many rows with no verb
    video_nouns = (torch.rand(40, 12, generator=generator) < 0.2).float()
    video_verbs = (torch.rand(40, 5, generator=generator) < 0.15).float()
    dense = supervision.batch_relevance(nouns, verbs, video_nouns, video_verbs)
    sparse = supervision.relevance(nouns, verbs, video_nouns, video_verbs)
    assert torch.allclose(dense, sparse, atol=1e-6)
    both_empty = (verbs.sum(1)[:, None] == 0) & (video_verbs.sum(1)[None, :] == 0)
    assert both_empty.any() and (dense[both_empty] <= 0.5).all()


def test_class_sets_stay_importable_from_supervision():
    """They moved to rudder.data.classes (the loader needs them without supervision); code
    written against docs/architecture.md's data flow still finds them here."""
    assert supervision.ClassIndex is ClassIndex
    assert supervision.video_class_sets is video_class_sets


# ----------------------------------------------------------------------------- relevant positives
def random_class_sets(n, classes, low, high, seed):
    g = torch.Generator().manual_seed(seed)
    sizes = torch.randint(low, high + 1, (n,), generator=g)
    ranks = torch.rand(n, classes, generator=g).argsort(dim=1).argsort(dim=1)
    return (ranks < sizes.unsqueeze(1)).float()


def sampler_case(n=60, seed=0, threshold=0.2):
    """Few classes (many shared), some captions without nouns or verbs, uneven weights."""
    nouns, verbs = random_class_sets(n, 6, 0, 3, seed), random_class_sets(n, 4, 0, 2, seed + 1)
    weights = torch.rand(n, generator=torch.Generator().manual_seed(seed + 2)).double() + 0.1
    return nouns, verbs, weights, supervision.RelevantCaptionSampler(nouns, verbs, weights,
                                                                     threshold)


def test_sampler_pair_relevance_is_relevance_bit_for_bit():
    nouns, verbs, _, sampler = sampler_case()
    full = relevance(nouns, verbs, nouns, verbs).numpy()
    query = torch.cat([nouns, verbs], 1).numpy()
    rows, cols = (x.reshape(-1) for x in np.indices(full.shape))
    assert np.array_equal(sampler.pair_relevance(query, rows, cols), full.reshape(-1))


@pytest.mark.parametrize("rounds", [supervision.RelevantCaptionSampler.ROUNDS, 1, 0])
def test_sampler_draws_the_full_rows_distribution(rounds, monkeypatch):
    # P(k) = w_k [R(query, k) > t] / sum: what torch.multinomial over the full relevance row
    # draws (rounds=0: every query takes the exact fallback over the captions sharing a class;
    # rounds=1: a few do); 8,000 draws per query.
    nouns, verbs, weights, sampler = sampler_case()
    monkeypatch.setattr(sampler, "ROUNDS", rounds)
    queries = torch.tensor([0, 1, 2, 5, 7])
    draws = 8_000
    rows = queries.repeat_interleave(draws)
    picks, none = sampler.draw(nouns[rows], verbs[rows], torch.Generator().manual_seed(1))
    expected = (relevance(nouns[queries], verbs[queries], nouns, verbs) > 0.2).double() * weights
    for i in range(len(queries)):
        got = picks[i * draws : (i + 1) * draws]
        if expected[i].sum() == 0:
            assert none[i * draws : (i + 1) * draws].all() and (got == -1).all()
            continue
        p = (expected[i] / expected[i].sum()).numpy()
        freq = np.bincount(got, minlength=len(p)) / draws
        assert set(np.flatnonzero(freq)) <= set(np.flatnonzero(p))  # only relevant captions
        assert np.abs(freq - p).max() < 5 * np.sqrt(p.max() / draws)  # 5 standard errors


def test_sampler_without_any_relevant_caption_says_none():
    nouns, verbs, weights, sampler = sampler_case()
    empty = torch.zeros(2, nouns.shape[1]), torch.zeros(2, verbs.shape[1])
    picks, none = sampler.draw(*empty, torch.Generator().manual_seed(0))
    assert none.all() and (picks == -1).all()
    strict = supervision.RelevantCaptionSampler(nouns, verbs, weights, 1.0)  # R > 1: never
    picks, none = strict.draw(nouns[:4], verbs[:4], torch.Generator().manual_seed(0))
    assert none.all()
    with pytest.raises(ValueError, match="one non-negative weight per caption"):
        supervision.RelevantCaptionSampler(nouns, verbs, weights[:3], 0.1)
