"""Escaping, the collection, candidate ordering, the search engine and the results tab."""

import json

import pandas as pd
import pytest
import torch

from app.candidates import CandidateRanker
from app.collection import Collection
from app.engine import SearchEngine
from app.escaping import cap_query, html_text, markdown_text
from app.results_tab import plot_runs, runs_table
from rudder.models import CollaborativeExperts


def test_escaping():
    assert (
        html_text('<script>alert("x")</script>')
        == "&lt;script&gt;alert(&quot;x&quot;)&lt;/script&gt;"
    )
    assert markdown_text("<b>*x*</b> [a](b)") == "&lt;b&gt;\\*x\\*&lt;/b&gt; \\[a\\]\\(b\\)"
    assert cap_query("  कागद\nदुमडा\x00 ") == "कागद दुमडा"
    assert (
        cap_query("र्\u200dया") == "र्\u200dया"
    )  # the zero-width joiner of Marathi eyelash ra stays
    assert len(cap_query("x" * 1000)) == 300
    with pytest.raises(ValueError, match="type a query"):
        cap_query(" \n ")


@pytest.fixture(scope="module")
def collection(app_dataset, media_dir):
    return Collection(app_dataset, media_dir)


def test_collection_reads_every_split(collection, media_dir, script_caption):
    assert len(collection.videos) == 30 and len(collection.captions) == 150
    assert collection.languages == ["en", "hi", "mr", "ta", "te"]
    assert collection.caption(script_caption[0])["text"] == script_caption[1]
    assert list(collection.captions.iloc[collection.caption_rows("v003")]["lang"]) == [
        "mr",
        "hi",
        "ta",
        "te",
        "en",
    ]
    assert collection.media_path("v000") == (media_dir / "v000.mp4").resolve()
    assert collection.media_path("v002") is None
    assert collection.media_path("../secret") is None  # never outside the media folder
    with pytest.raises(KeyError, match="no caption 'nope'"):
        collection.caption("nope")


def test_candidates_follow_the_noun_verb_heuristic(collection):
    # Video i has noun i % 5 and verb (i // 5) % 3, so v000 is (paper, fold): v015 is
    # (paper, fold) again -> positive; paper alone: v005, v010, v020, v025, fold alone:
    # v001-v004 and v016-v019 -> partial (alpha 0.5, R = 0.5); the other 16 negative.
    ranked = CandidateRanker(collection).rank("v000-mr", lang="mr", limit=30)
    assert "v000" not in set(ranked["video_id"]) and set(ranked["lang"]) == {"mr"}
    assert ranked["heuristic"].iloc[0] == "positive" and ranked["caption_id"].iloc[0] == "v015-mr"
    order = {"positive": 2, "partial": 1, "negative": 0}
    assert list(ranked["heuristic"].map(order)) == sorted(
        ranked["heuristic"].map(order), reverse=True
    )
    partial = ranked[ranked["heuristic"] == "partial"]
    assert (partial["relevance"] == 0.5).all()
    assert set(partial["video_id"]) == {
        f"v{i:03d}" for i in (5, 10, 20, 25, 1, 2, 3, 4, 16, 17, 18, 19)
    }
    negative = ranked[ranked["heuristic"] == "negative"]
    assert len(negative) == 16 and (negative["relevance"] == 0).all()
    any_lang = CandidateRanker(collection).rank("v000-mr", lang=None, limit=5)
    assert set(any_lang["video_id"]) == {"v015"}  # its five captions share both classes


def test_candidates_without_labels_use_text_similarity(tmp_path, collection):
    bare = Collection.__new__(Collection)
    bare.__dict__.update(collection.__dict__)
    bare.captions = collection.captions.drop(
        columns=["nouns", "verbs", "noun_classes", "verb_classes"]
    )
    ranker = CandidateRanker(bare)
    assert ranker.method == "text" and "heuristics label" in ranker.description
    ranked = ranker.rank("v000-en", lang="en", limit=3)
    assert ranked["caption_id"].iloc[0] == "v015-en"  # the identical text "fold the paper"
    assert ranked["heuristic"].isna().all() and ranked["similarity"].iloc[0] == pytest.approx(1.0)


def test_engine_scores_are_the_model_similarity(collection, model_and_vocab, tmp_path):
    model, vocab = model_and_vocab
    engine = SearchEngine(model, vocab, collection, cache_dir=tmp_path)
    hits = engine.search("कागद दुमडा", "mr", k=30, display_lang="hi")
    text, logits = engine.embed_texts(["कागद दुमडा"], ["mr"])
    expected = CollaborativeExperts.similarity(
        text, logits, engine.index.embeddings, engine.index.available
    )[0]
    order = sorted(range(30), key=lambda i: (-expected[i].item(), i))
    assert [h.video_id for h in hits] == [engine.index.video_ids[i] for i in order]
    assert [h.score for h in hits] == pytest.approx(expected[order].tolist(), abs=1e-6)
    assert all(h.caption_lang == "hi" for h in hits) and all(
        h.caption_id.endswith("-hi") for h in hits
    )
    assert hits[0].experts == collection.experts_of(hits[0].video_id)


def test_best_caption_is_the_closest_in_the_display_language(collection, model_and_vocab, tmp_path):
    model, vocab = model_and_vocab
    engine = SearchEngine(model, vocab, collection, cache_dir=tmp_path)
    # Give one video two English captions and check the closer one (by the documented
    # formula) is shown.
    extra = collection.captions.iloc[[collection.caption_rows("v004")[0]]].copy()
    extra[["caption_id", "lang", "text"]] = ["v004-en2", "en", "paint the bottle and the car"]
    collection.captions = pd.concat([collection.captions, extra], ignore_index=True)
    collection._by_video = collection.captions.groupby("video_id", sort=False).indices
    try:
        query_emb, logits = engine.embed_texts(["cut the clay"], ["en"])
        weights = torch.softmax(logits, -1)
        closeness = {}
        for cid, text in (
            ("v004-en", collection.caption("v004-en")["text"]),
            ("v004-en2", extra["text"].iat[0]),
        ):
            emb, _ = engine.embed_texts([text], ["en"])
            closeness[cid] = float(((emb * query_emb).sum(-1) * weights).sum())
        best = engine._best_captions(query_emb, logits, ["v004"], "en")
        chosen = collection.captions.iloc[best["v004"]]["caption_id"]
        assert chosen == max(closeness, key=closeness.get)
    finally:
        collection.captions = collection.captions.iloc[:-1]
        collection._by_video = collection.captions.groupby("video_id", sort=False).indices


def write_run(root, name, r_at, losses, dataset="sample"):
    run = root / name
    (run / "checkpoints").mkdir(parents=True)
    (run / "config.yaml").write_text(f"data:\n  dataset: {dataset}\nloss:\n  name: mm\n")
    test = {
        "t2v": {f"R{k}": v for k, v in zip((1, 5, 10, 50), r_at)} | {"MdR": 3.0},
        "v2t": {"R1": 1.0},
    }
    (run / "metrics.json").write_text(json.dumps({"test": test, "best_epoch": 2}))
    lines = [
        {"epoch": e + 1, "split": "validation", "train_loss": loss, "t2v": {"R10": 10.0 * (e + 1)}}
        for e, loss in enumerate(losses)
    ]
    (run / "metrics.jsonl").write_text(
        "".join(json.dumps(line) + "\n" for line in lines) + "{partial line"
    )
    return run


def test_results_table_and_plots(tmp_path):
    write_run(tmp_path, "a-run", (10.0, 30.0, 50.0, 90.0), [2.0, 1.5, 1.2])
    write_run(tmp_path, "b-run", (20.0, 40.0, 60.0, 95.0), [1.0, 0.5])
    table = runs_table(tmp_path)
    assert set(table["run"]) == {"a-run", "b-run"}
    row = table.set_index("run").loc["a-run"]
    assert (row["t2v R1"], row["t2v R50"], row["t2v MdR"], row["best epoch"], row["loss"]) == (
        10.0,
        90.0,
        3.0,
        2,
        "mm",
    )
    assert "t2v nDCG" not in table.columns  # metrics no run has are left out
    rk, curve, loss = plot_runs(tmp_path, ["a-run", "b-run", "../outside"])
    assert [list(line.get_ydata()) for line in rk.axes[0].lines] == [
        [10.0, 30.0, 50.0, 90.0],
        [20.0, 40.0, 60.0, 95.0],
    ]
    assert [list(line.get_ydata()) for line in loss.axes[0].lines] == [[2.0, 1.5, 1.2], [1.0, 0.5]]
    assert list(curve.axes[0].lines[0].get_xdata()) == [1, 2, 3]
    assert runs_table(tmp_path / "missing").empty


def test_results_table_without_runs_keeps_its_key_columns(tmp_path):
    assert list(runs_table(tmp_path).columns) == ["run", "dataset", "loss", "best epoch"]
