"""Candidate queues: the strategies' pairs, their scores against direct loops, the service
that stores them and the annotation tab that serves them."""

from types import SimpleNamespace

import numpy as np
import pytest

from app.annotate_handlers import ANY, SAME, AnnotateTab
from app.annotations_db import AnnotationStore
from app.candidates import CandidateRanker
from app.collection import Collection
from app.pair_queue import QueueBuilder, QueueError, diverse_order
from app.queue_service import QueueService

DATASET = "app-test"


@pytest.fixture(scope="module")
def collection(app_dataset):
    return Collection(app_dataset)


@pytest.fixture(scope="module")
def builder(collection):
    return QueueBuilder(collection, limit=6, block=7)  # small blocks: several per queue


def fake_scores(builder, seed=0):
    """Similarities of the queue captions to every video, random but fixed."""
    videos = builder.collection.videos["video_id"].tolist()
    return np.random.default_rng(seed).normal(size=(len(builder.rows), len(videos))), videos


def test_the_universe_is_training_captions_in_the_languages(collection):
    builder = QueueBuilder(collection, languages=["mr", "en"])
    captions = collection.captions.iloc[builder.rows]
    assert set(captions["split"]) == {"train"} and set(captions["lang"]) == {"mr", "en"}
    with pytest.raises(QueueError, match="no train captions in xx"):
        QueueBuilder(collection, languages=["xx"])


def test_the_heuristic_queue_is_todays_order(collection, builder):
    queue = builder.heuristic()
    ranker = CandidateRanker(collection)
    captions = collection.captions
    universe = set(builder.rows)
    for query in builder.rows[:12]:
        query_id = captions["caption_id"].iat[query]
        ranked = ranker.rank(query_id, captions["lang"].iat[query], limit=10_000)
        expected = [row for row in ranked["row"] if row in universe][:6]
        assert queue.b[queue.a == query].tolist() == expected
    assert queue.a.tolist() == sorted(queue.a.tolist())  # queries in dataset order


def test_random_pairs_are_distinct_pairs_of_two_videos(builder):
    queue = builder.random(size=500, seed=3)
    videos = builder.collection.captions["video_id"].to_numpy()
    assert len(queue) == 500 and len(set(zip(queue.a, queue.b, strict=True))) == 500
    assert (videos[queue.a] != videos[queue.b]).all()
    assert set(queue.a) | set(queue.b) <= set(builder.rows)
    again = builder.random(size=500, seed=3)
    assert np.array_equal(queue.a, again.a) and np.array_equal(queue.b, again.b)
    ranker = CandidateRanker(builder.collection)
    ids = builder.collection.captions["caption_id"].to_numpy()
    codes = {"negative": 0, "partial": 1, "positive": 2}
    for a, b, label in list(zip(queue.a, queue.b, queue.heuristic, strict=True))[:40]:
        assert codes[ranker.pair(ids[a], ids[b])["heuristic"]] == label


def direct_boundary(builder, q, c):
    best = 0.0
    for part, alpha in ((builder.nouns, builder.alpha_n), (builder.verbs, builder.alpha_v)):
        size, shared = part[q].sum().item(), (part[q] * part[c]).sum().item()
        if size and shared:
            best = max(best, 1 - abs(shared / size - alpha) / max(alpha, 1 - alpha))
    return best


def direct_disagreement(labels, rank, eligible, q, j):
    """A negative: the share of partial and positive candidates ranked below it; a positive:
    the share of negative and partial ones ranked above it (ties: half); a partial: 0."""
    grade = labels[q, j]
    if grade == 1:
        return 0.0
    others = [k for k in np.flatnonzero(eligible[q])
              if (labels[q, k] >= 1 if grade == 0 else labels[q, k] <= 1)]
    if not others:
        return 0.0
    if grade == 0:
        wrong = [(rank[q, k] > rank[q, j]) + 0.5 * (rank[q, k] == rank[q, j]) for k in others]
    else:
        wrong = [(rank[q, k] < rank[q, j]) + 0.5 * (rank[q, k] == rank[q, j]) for k in others]
    return sum(wrong) / len(others)


def direct_uncertainty(builder, labels, q, j):
    segment = np.flatnonzero(builder.segment == builder.segment[j])
    counts = np.bincount(labels[q, segment], minlength=3)
    return 1 - counts.max() / len(segment)


def test_the_scores_match_direct_loops(builder):
    queries = np.arange(5)
    labels = builder.labels(queries)
    boundary = builder.boundary(queries)
    uncertainty = builder.uncertainty(labels)
    scores, videos = fake_scores(builder)
    ranks = builder.video_ranks(scores, videos)
    eligible = builder._other_video(queries)
    disagreement = builder.disagreement(labels, ranks[queries], eligible)
    candidate_rank = ranks[queries][:, builder.video]
    for q in queries:
        for j in range(len(builder.rows)):
            assert boundary[q, j] == pytest.approx(direct_boundary(builder, q, j), abs=1e-6)
            assert uncertainty[q, j] == pytest.approx(direct_uncertainty(builder, labels, q, j))
            assert disagreement[q, j] == pytest.approx(
                direct_disagreement(labels, candidate_rank, eligible, q, j), abs=1e-6)


def test_boundary_and_disagreement_by_hand():
    import torch

    from app.pair_queue import QueueBuilder as Builder

    # query nouns {a, b, c}, verbs {x}; alpha 0.5. Candidates: itself (all shared: far from
    # the partial threshold), {a} (1/3 of the nouns: 1 - |1/3 - 1/2| / 0.5 = 2/3), {a, b} and
    # verb x (nouns 2/3: 2/3; the verb 1/1: 0), nothing shared (0)
    fake = SimpleNamespace(alpha_n=0.5, alpha_v=0.5, rows=np.arange(4))
    fake.nouns = torch.tensor([[1.0, 1, 1], [1, 0, 0], [1, 1, 0], [0, 0, 0]])
    fake.verbs = torch.tensor([[1.0], [0], [1], [0]])
    assert Builder.boundary(fake, np.array([0])) == pytest.approx(np.array([[0, 2 / 3, 2 / 3, 0]]))
    # three candidates of three videos: negative ranked 1st, partial 2nd, positive 3rd
    fake = SimpleNamespace(video=np.array([0, 1, 2]), rows=np.arange(3))
    labels = np.array([[0, 1, 2]])
    eligible = np.ones((1, 3), dtype=bool)
    got = Builder.disagreement(fake, labels, np.array([[1, 2, 3]]), eligible)
    # the negative is above both relevant ones, the positive below both others; a partial
    # is never contested by the ranking
    assert got.tolist() == [[1.0, 0.0, 1.0]]
    got = Builder.disagreement(fake, labels, np.array([[3, 2, 1]]), eligible)
    assert got.tolist() == [[0.0, 0.0, 0.0]]


def test_diverse_order_serves_every_query_video_before_any_second():
    query = np.array([0, 0, 0, 1, 1, 2])
    candidate = np.array([5, 5, 6, 5, 7, 8])
    value = np.array([0.9, 0.8, 0.1, 0.5, 0.4, 0.2])
    order = diverse_order(query, candidate, value)
    # round 0: each query's best (0.9, 0.5, 0.2), by value; round 1: query 1's second (0.4)
    # and query 0's second, its new candidate video 6 (0.1) before its repeated 5 (0.8)
    assert order.tolist() == [0, 3, 5, 4, 2, 1]


def test_the_model_queue_spreads_over_query_videos(builder):
    queue = builder.model_disagreement(*fake_scores(builder))
    videos = builder.collection.captions["video_id"].to_numpy()
    query_videos = len(set(videos[builder.rows]))
    first = videos[queue.a[:query_videos]]
    assert len(set(first)) == query_videos  # every query video once before any twice
    assert (videos[queue.a] != videos[queue.b]).all()
    counts = np.bincount(queue.a)
    assert counts.max() <= 6 and np.isfinite(queue.value).all()
    assert ((queue.model_rank >= 1) & (queue.model_rank <= query_videos)).all()
    with pytest.raises(QueueError, match="model scores have 3 rows"):
        builder.model_disagreement(np.zeros((3, 5)), list("abcde"))


# ------------------------------------------------------------------ service and tab
class FakeEngine:
    """What the queue service reads of a search engine: languages, an index, embeddings."""

    def __init__(self, builder, key="model-1"):
        self.train_langs = ("mr", "hi", "ta", "te", "en")
        scores, videos = fake_scores(builder)
        self._scores = scores
        self.index = SimpleNamespace(key=key, video_ids=videos, __len__=lambda: len(videos))
        self.index = FakeIndex(key, videos, scores)

    def embed_texts(self, texts, langs):
        import torch

        return torch.zeros(len(texts), 1), torch.zeros(len(texts), 1)


class FakeIndex:
    def __init__(self, key, videos, scores):
        self.key, self.video_ids, self._scores, self._next = key, videos, scores, 0

    def __len__(self):
        return len(self.video_ids)

    def scores(self, emb, logits):
        import torch

        rows = self._scores[self._next:self._next + len(emb)]
        self._next += len(emb)
        return torch.from_numpy(rows)


@pytest.fixture
def tab(collection, tmp_path):
    store = AnnotationStore(tmp_path / "labels.sqlite")
    builder = QueueBuilder(collection)
    engine = FakeEngine(builder)
    queues = QueueService(store, {DATASET: collection}, lambda name: engine, share=0.2)
    return AnnotateTab(store, {DATASET: collection}, queues=queues)


def test_the_queue_order_serves_labels_and_skips(tab):
    tab.queues.wait(DATASET, "model-disagreement")
    first = tab.next_unlabelled("asha", DATASET, ANY, "model-disagreement")
    assert first.candidate_id and "Queue model-disagreement, pair 1 of" in first.candidate_html
    assert "Queue model-disagreement" in first.progress.replace("\\", "")
    second = tab.label("partial", "asha", DATASET, first.query_id, first.candidate_id, ANY,
                       "model-disagreement")
    assert "pair 2 of" in second.candidate_html and "**1 of" in second.progress
    skipped = tab.skip("asha", DATASET, second.query_id, second.candidate_id, ANY,
                       "model-disagreement")
    assert "pair 3 of" in skipped.candidate_html
    # ravi starts where the queue is open for him: pair 2 (pair 1 has its one label, or two
    # when it is a double pair)
    row = tab.store.queue_row(DATASET, "model-disagreement", first.query_id, first.candidate_id)
    ravi = tab.next_unlabelled("ravi", DATASET, ANY, "model-disagreement")
    expected = first.candidate_id if row["copies"] == 2 else second.candidate_id
    assert ravi.candidate_id == expected
    if row["copies"] == 2:
        assert "second opinion" in ravi.candidate_html


def test_a_label_outside_the_queue_is_kept_and_said_so(tab):
    tab.queues.wait(DATASET, "heuristic")
    shown = tab.label("negative", "asha", DATASET, "v000-mr", "v029-mr", SAME, "heuristic")
    assert "v000-mr / v029-mr is not in the heuristic queue" in shown.progress.replace("\\", "")
    assert [r["caption_id_b"] for r in tab.store.current(DATASET, "asha")] == ["v029-mr"]
    assert shown.candidate_id  # the queue goes on


def test_a_queue_not_ready_says_so_and_goes_on_query_by_query(collection, tmp_path):
    store = AnnotationStore(tmp_path / "labels.sqlite")
    tab = AnnotateTab(store, {DATASET: collection})  # no model serves this dataset
    shown = tab.next_unlabelled("asha", DATASET, SAME, "model-disagreement")
    progress = shown.progress.replace("\\", "")
    assert "needs the model that serves app-test" in progress
    assert "Meanwhile: query by query" in progress and shown.candidate_id
    with pytest.raises(Exception, match="unknown order"):
        tab.next_unlabelled("asha", DATASET, SAME, "best-first")


def test_a_stored_queue_is_reused_and_a_new_model_rebuilds_it(collection, tmp_path):
    store = AnnotationStore(tmp_path / "labels.sqlite")
    builder = QueueBuilder(collection)
    engines = {"now": FakeEngine(builder, key="model-1")}
    service = QueueService(store, {DATASET: collection}, lambda name: engines["now"])
    service.wait(DATASET, "model-disagreement")
    built = store.queue_info(DATASET, "model-disagreement")
    restarted = QueueService(store, {DATASET: collection}, lambda name: engines["now"])
    assert restarted.ensure(DATASET, "model-disagreement") == (True, "")
    assert store.queue_info(DATASET, "model-disagreement") == built
    engines["now"] = FakeEngine(builder, key="model-2")
    ready, message = restarted.ensure(DATASET, "model-disagreement")
    assert not ready and "is being built" in message
    restarted.wait(DATASET, "model-disagreement")
    assert store.queue_info(DATASET, "model-disagreement")["key"] != built["key"]
