"""One caption, one video, one similarity: the same float32 bits whatever the batch, its order,
the caller's thread count or the path (a split's matrix, texts embedded alone, the app's
search). float32 products depend on the row count (small products take other kernels) and
on how MKL splits them between threads, so only fixed shapes on one thread give this."""

import json

import pytest
import torch

from rudder import models
from rudder.config import ModelConfig
from rudder.data.loader import build_class_index, build_vocabulary, load_split, select_experts
from rudder.data.lookup import resolve_dataset
from rudder.evaluation import inference
from rudder.evaluation.inference import (
    BLOCK,
    embed_texts,
    embed_videos,
    similarities,
    similarity_matrix,
)
from rudder.text import tokenize

MAX_WORDS, MAX_FRAMES = 30, 32


@pytest.fixture(scope="module")
def setting():
    """A randomly initialised CE model at the default sizes on the sample's seven experts, and
    the sample's test split (160 videos, 1,822 Marathi and English captions: blocks of
    captions and of videos; the app's index holds all 800 videos)."""
    folder = resolve_dataset("sample")
    experts = select_experts(folder, None, ["mr", "hi", "ta", "te"])
    vocab = build_vocabulary(folder, ["mr", "en"])
    torch.manual_seed(0)
    model = models.build(ModelConfig(), {e: folder.meta.experts[e] for e in experts},
                         vocab.table_size).eval()
    data = load_split(folder, "test", experts, vocab, ["mr", "en"], build_class_index(folder),
                      MAX_WORDS, MAX_FRAMES)
    return folder, model, vocab, data


@pytest.fixture
def threads():
    """Restores torch's intra-op thread count after a test changes it."""
    before = torch.get_num_threads()
    yield
    torch.set_num_threads(before)


def caption_rows(data):
    """(flat row, text, lang) of every valid caption slot, video-major."""
    slots = data.caption_mask.shape[1]
    return [(v * slots + k, data.caption_texts[v, k], data.caption_langs[v, k])
            for v, k in torch.nonzero(data.caption_mask).tolist()]


def token_input(vocab, texts, langs):
    tokens, mask = vocab.batch([tokenize(t, lang) for t, lang in zip(texts, langs, strict=True)],
                               max_len=MAX_WORDS)
    return lambda rows: (tokens[rows], mask[rows])


def test_a_split_scores_the_same_with_any_thread_count(setting, threads):
    _, model, _, data = setting
    torch.set_num_threads(1)
    one = similarity_matrix(model, data, "cpu", MAX_WORDS, MAX_FRAMES)
    # rudder.evaluate on a 16-core machine (torch's default), the trainer on one thread:
    # MKL splits the gating's batched products otherwise there (101 of the 291,520 values
    # differed before scoring ran on one thread)
    torch.set_num_threads(16)
    sixteen = similarity_matrix(model, data, "cpu", MAX_WORDS, MAX_FRAMES)
    assert torch.equal(one, sixteen)
    assert torch.get_num_threads() == 16  # the caller's setting is restored


def test_texts_embedded_alone_or_in_any_order_score_as_their_split_rows(setting):
    _, model, vocab, data = setting
    sims = similarity_matrix(model, data, "cpu", MAX_WORDS, MAX_FRAMES)
    rows = caption_rows(data)
    assert len(rows) > BLOCK  # several blocks, a short last one
    videos = embed_videos(model, data, "cpu", MAX_FRAMES)
    flat, texts, langs = zip(*reversed(rows), strict=True)  # another order, other blocks
    text, logits = embed_texts(model, token_input(vocab, texts, langs), len(texts), "cpu",
                               MAX_WORDS)
    assert torch.equal(similarities(model, text, logits, videos, data.available),
                       sims[list(flat)])
    for row, caption, lang in rows[:: len(rows) // 7]:  # one at a time, as the app's queries
        text, logits = embed_texts(model, token_input(vocab, [caption], [lang]), 1, "cpu",
                                   MAX_WORDS)
        assert torch.equal(similarities(model, text, logits, videos, data.available)[0],
                           sims[row])
        some = torch.tensor([3, 0, 7])  # a few videos, in another order
        assert torch.equal(similarities(model, text, logits, videos[some],
                                        data.available[some])[0], sims[row, some])


def test_the_model_leaves_scoring_in_the_mode_it_came_in(setting):
    _, model, _, data = setting
    model.train()
    similarity_matrix(model, data, "cpu", MAX_WORDS, MAX_FRAMES)
    assert model.training
    model.eval()
    similarity_matrix(model, data, "cpu", MAX_WORDS, MAX_FRAMES)
    assert not model.training


def test_the_apps_search_scores_a_caption_as_evaluation_does(setting, tmp_path, threads):
    from app.collection import Collection
    from app.engine import SearchEngine

    folder, model, vocab, data = setting
    sims = similarity_matrix(model, data, "cpu", MAX_WORDS, MAX_FRAMES)
    torch.set_num_threads(2)  # the app's process keeps torch's default
    engine = SearchEngine(model, vocab, Collection(folder), max_words=MAX_WORDS,
                          max_frames=MAX_FRAMES, cache_dir=tmp_path)
    assert len(engine.index) > BLOCK > data.num_videos  # every split: other video blocks
    column = torch.tensor([engine.index.video_ids.index(v) for v in data.video_ids])
    for row, caption, lang in caption_rows(data)[::97]:
        order, scores = engine.rank(*engine.embed_texts([caption], [lang]), len(engine.index))
        every = torch.empty(len(engine.index))
        every[order] = scores
        assert torch.equal(every[column], sims[row])
    hits = engine.search(caption, lang, k=3)  # search ranks with these scores
    assert [hit.score for hit in hits] == scores[:3].tolist()
    assert [hit.video_id for hit in hits] == [engine.index.video_ids[i] for i in order[:3]]


def test_blocks_have_one_shape():
    shapes = {len(rows) for _, _, rows in inference.blocks(2 * BLOCK + 3)}
    assert shapes == {BLOCK}
    spans = [(start, stop) for start, stop, _ in inference.blocks(2 * BLOCK + 3)]
    assert spans == [(0, BLOCK), (BLOCK, 2 * BLOCK), (2 * BLOCK, 2 * BLOCK + 3)]
    last = list(inference.blocks(2 * BLOCK + 3))[-1][2]
    assert last[:3].tolist() == [2 * BLOCK, 2 * BLOCK + 1, 2 * BLOCK + 2]
    assert set(last[3:].tolist()) == {2 * BLOCK + 2}  # padded with the last real row


@pytest.mark.slow
def test_a_trained_run_gives_the_same_numbers_on_every_path(tmp_path, threads, monkeypatch):
    """The trainer's test pass, ``rudder.evaluate`` of the run and of its published folder
    (under another thread count, as on a many-core machine), and the app's search: the same
    similarities, bit for bit, and so the same metrics."""
    import numpy as np

    from app.__main__ import engine_for
    from app.collection import Collection
    from rudder import train
    from rudder.evaluation import evaluate
    from rudder.evaluation.loading import load_run
    from rudder.hub import publish
    from rudder.runs.layout import evaluation_predictions_file, metrics_file, predictions_file

    run = tmp_path / "run"
    train.main(["--dataset", "sample", "--epochs", "2", "--output-dir", str(run)])
    trained = json.loads(metrics_file(run).read_text())["test"]
    with np.load(predictions_file(run)) as saved:
        sims = saved["sims"]
    publish.main([str(run), "--repo-id", "me/same", "--dry-run", "--stage",
                  str(tmp_path / "staged")])
    torch.set_num_threads(16)
    for source, out in ((run, tmp_path / "e-run"), (tmp_path / "staged", tmp_path / "e-pub")):
        assert evaluate.main([str(source), "--output", str(out)])["test"] == trained
        with np.load(evaluation_predictions_file(out)) as again:
            assert np.array_equal(again["sims"], sims)

    monkeypatch.setattr("rudder.search.index_cache.default_cache_dir", lambda: tmp_path / "i")
    loaded = load_run(run)
    engine = engine_for(loaded, Collection(loaded.dataset))  # as python -m app --checkpoint
    with np.load(predictions_file(run)) as saved:
        captions, videos = saved["caption_ids"], saved["video_ids"].tolist()
    table = loaded.dataset.captions("test").to_pandas().set_index("caption_id")
    column = torch.tensor([engine.index.video_ids.index(v) for v in videos])
    rows = np.flatnonzero(captions.reshape(-1) != "None")[::61]
    for row in rows:
        caption = table.loc[captions.reshape(-1)[row]]
        order, scores = engine.rank(*engine.embed_texts([caption["text"]], [caption["lang"]]),
                                    len(engine.index))
        every = torch.empty(len(engine.index))
        every[order] = scores
        assert np.array_equal(every[column].numpy(), sims.reshape(-1, len(videos))[row])
