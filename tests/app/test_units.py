"""Escaping, the collection, candidate ordering, the search engine and the results tab."""

import json

import numpy as np
import pandas as pd
import pytest
import torch

from app.candidates import CandidateRanker
from app.collection import Collection
from app.engine import SearchEngine, word_overlap
from app.escaping import cap_query, html_text, markdown_text
from app.results_tab import per_language_table, plot_runs, runs_table
from app.search_tab import SearchTab, detection_note
from rudder.data.layout import DatasetFolder, ExpertInfo, LayoutError
from rudder.models import CollaborativeExperts
from rudder.text import tokenize

from ..factories import caption, write_dataset
from .conftest import build_app_dataset, random_model


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


def test_a_dataset_without_video_tables_is_a_clear_error(tmp_path):
    folder = build_app_dataset(tmp_path / "novids")
    for table in (folder.root / "videos").glob("*.parquet"):
        table.unlink()
    with pytest.raises(LayoutError, match=f"{folder.root}: no split has videos"):
        Collection(folder)


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


def test_caption_vectors_are_kept_per_video_and_independent_of_the_other_videos(
    collection, model_and_vocab, tmp_path
):
    model, vocab = model_and_vocab
    engine = SearchEngine(model, vocab, collection, cache_dir=tmp_path)
    together = engine.caption_vectors(["v001", "v004", "v009"])
    assert len(engine._caption_cache) == 3  # kept for the next searches
    fresh = SearchEngine(model, vocab, collection, index=engine.index)
    alone = torch.cat([fresh.caption_vectors([v]) for v in ("v009", "v004", "v001")][::-1])
    assert torch.equal(together, alone)
    rows = collection.caption_rows("v004")
    texts, langs = collection.captions["text"].iloc[rows], collection.captions["lang"].iloc[rows]
    assert torch.equal(engine.caption_vectors(["v004"]),
                       engine.embed_texts(texts, langs)[0].flatten(1))
    hits = engine.search("कागद दुमडा", "mr", k=8, display_lang="hi")
    assert engine.search("कागद दुमडा", "mr", k=8, display_lang="hi") == hits  # from the cache
    # a found video without captions gets no caption; the others are unaffected
    query_emb, logits = engine.embed_texts(["cut the clay"], ["en"])
    best = engine._best_captions("cut the clay", "en", query_emb, logits,
                                 ["no-captions", "v004"], "en")
    assert best == engine._best_captions("cut the clay", "en", query_emb, logits, ["v004"], "en")
    assert list(best) == ["v004"]


def test_best_caption_is_the_closest_among_equal_matches(collection, model_and_vocab, tmp_path):
    model, vocab = model_and_vocab
    engine = SearchEngine(model, vocab, collection, cache_dir=tmp_path)
    # Give one video two English captions that hold the same share of the query's words and
    # check the closer one (by the documented formula) is shown.
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
        best = engine._best_captions("cut the clay", "en", query_emb, logits, ["v004"], "en")
        chosen = collection.captions.iloc[best["v004"]]["caption_id"]
        assert chosen == max(closeness, key=closeness.get)
    finally:
        collection.captions = collection.captions.iloc[:-1]
        collection._by_video = collection.captions.groupby("video_id", sort=False).indices


def test_shown_caption_holds_most_query_words_among_captions_of_one_segment(tmp_path):
    """MSR-VTT-like: every caption spans the whole video; the one holding most of the
    query's words is shown, even when another caption is closer in the model's space."""
    texts = ["a man folds a paper boat", "someone is cutting clay", "a person paints a car",
             "kids play with a bottle", "a woman is cooking food"]
    videos = [f"m{i}" for i in range(8)]
    rows = [caption(f"{v}-en-{j}", v, "en", t, start=0.0, end=10.0)
            for v in videos for j, t in enumerate(texts)]
    features = {"scene": (ExpertInfo(16), videos, np.random.default_rng(0).normal(size=(8, 16)))}
    splits = ["train"] * 6 + ["validation", "test"]
    write_dataset(tmp_path / "ds", dict(zip(videos, splits, strict=True)),
                  rows, features, languages=("en",), name="one-segment")
    folder = DatasetFolder(tmp_path / "ds")
    model, vocab = random_model(folder, seed=0, langs=("en",))
    engine = SearchEngine(model, vocab, Collection(folder), cache_dir=tmp_path / "index",
                          train_langs=("en",))
    caption_embs, _ = engine.embed_texts(texts, ["en"] * len(texts))
    closer_elsewhere = 0
    for query in ("man boat", "folds paper", "cutting", "paints car", "bottle kids",
                  "woman food", "clay someone"):
        overlap = word_overlap(query, "en", texts)
        for hit in engine.search(query, "en", k=8, display_lang="en"):
            assert overlap[texts.index(hit.caption)] == overlap.max(), (query, hit.caption)
        query_emb, logits = engine.embed_texts([query], ["en"])
        closeness = ((caption_embs * query_emb).sum(-1) * torch.softmax(logits, -1)).sum(-1)
        closer_elsewhere += int(overlap[int(closeness.argmax())] < overlap.max())
    assert closer_elsewhere > 0  # the closest caption is not always the best match


def expected_segment(collection, video_id, query) -> int | None:
    """The segment of ``video_id`` whose Marathi caption holds strictly more query words."""
    words = set(tokenize(query, "mr"))
    shares = {}
    for row in map(collection.record, collection.caption_rows(video_id)):
        if row["lang"] == "mr":
            shares[int(row["start"] // 5)] = len(words & set(tokenize(row["text"], "mr")))
    best = max(shares.values())
    winners = [s for s, share in shares.items() if share == best]
    return winners[0] if len(winners) == 1 else None


def test_shown_caption_matches_the_query_in_the_display_language(
    segment_dataset, segment_model, tmp_path
):
    """The caption shown is the display-language one of the segment the query matches."""
    collection = Collection(segment_dataset)
    model, vocab = segment_model
    engine = SearchEngine(model, vocab, collection, cache_dir=tmp_path)
    checked = 0
    for source in ("s03", "s04", "s07"):
        query = collection.caption(f"{source}-mr-1")["text"]  # the second segment's words
        english = {h.video_id: h for h in engine.search(query, "mr", k=12, display_lang="en")}
        hindi = {h.video_id: h for h in engine.search(query, "mr", k=12, display_lang="hi")}
        tamil = {h.video_id: h for h in engine.search(query, "mr", k=12, display_lang="ta")}
        assert english[source].caption_id == f"{source}-en-1"
        for video_id, hit in english.items():
            segment = expected_segment(collection, video_id, query)
            if segment is None:
                continue
            checked += 1
            assert hit.caption_id == f"{video_id}-en-{segment}"
            # Hindi only captions segment 0: shown whatever the match; no Tamil: the match.
            assert hindi[video_id].caption_id == f"{video_id}-hi-0"
            assert tamil[video_id].caption_id == f"{video_id}-mr-{segment}"
    assert checked >= 12


def test_page_says_when_the_model_cannot_read_the_query(
    collection, model_and_vocab, trilingual_model, tmp_path
):
    full = SearchTab(SearchEngine(*model_and_vocab, collection, cache_dir=tmp_path))
    status, table, _ = full.search("காகிதம் மடியுங்கள்", k=5)
    assert "Tamil" in status and "⚠" not in status and len(table) == 5  # both words known
    status, table, _ = full.search("कागद झुमरू टिमटिम", "mr", k=5)
    assert "2 of the query's 3 words are unknown to the model (झुमरू, टिमटिम)" in status
    assert len(table) == 5
    status, table, _ = full.search("झुमरू टिमटिम", "mr", k=5)
    assert "None of the query's words is in the model's vocabulary" in status and table.empty

    model, vocab = trilingual_model
    engine = SearchEngine(
        model, vocab, collection, cache_dir=tmp_path / "tri", train_langs=("mr", "hi", "en")
    )
    for query, name in (("காகிதம் மடியுங்கள்", "Tamil"), ("కాగితం మడవండి", "Telugu")):
        status, table, _ = SearchTab(engine).search(query, k=5)
        assert f"not trained on {name} captions (only on Marathi, Hindi, English)" in status
        assert table.empty  # no made-up ranking
    status, table, _ = SearchTab(engine).search("कागद दुमडा", k=5)
    assert "⚠" not in status and len(table) == 5
    assert "**Marathi** (detected from its words and script, 99% confident)" in status
    status, _, _ = SearchTab(engine).search("कागज़ को मोड़िए", k=5)  # Hindi, same script
    assert "**Hindi** (detected from its words and script" in status
    status, _, _ = SearchTab(engine).search("कागज़ को मोड़िए", "mr", k=5)
    assert "**Marathi** (chosen)" in status  # the manual choice wins


def test_a_failed_translation_is_not_followed_by_the_advice_to_translate(
    collection, trilingual_model, tmp_path
):
    from .conftest import FakeTranslator

    model, vocab = trilingual_model
    engine = SearchEngine(
        model, vocab, collection, cache_dir=tmp_path, train_langs=("mr", "hi", "en")
    )
    tab = SearchTab(engine, translator=FakeTranslator({}))  # offline: every call fails
    status, _, _ = tab.search("காகிதம் மடியுங்கள்", k=5)
    assert "Tick “Translate the query”, or use a model trained on Tamil" in status
    status, _, _ = tab.search("காகிதம் மடியுங்கள்", k=5, translate=True, target="en")
    assert "⚠ Translation unavailable: cannot reach Google Translate" in status
    assert "Translate the query" not in status
    assert "its ranking does not reflect this query. Use a model trained on Tamil" in status


def test_detection_note_gives_the_confidence_and_the_way_out():
    from rudder.languages import LanguageGuess, identify_language

    assert detection_note(identify_language("मुलगा शाळेत जातो")) == (
        "detected from its words and script, 100% confident"
    )
    unsure = LanguageGuess("hi", 0.61, "Devanagari", (("hi", 0.61), ("mr", 0.39)))
    assert detection_note(unsure) == (
        "detected from its words and script, 61% confident (Marathi 39%); "
        "choose the language if it is wrong"
    )
    # A query without a language (no letters, an uncovered script) is not searched at all:
    # tests/app/test_search_page.py checks its messages.


def write_run(root, name, r_at, losses, dataset="sample", loss="mm", per_language=None):
    run = root / name
    (run / "checkpoints").mkdir(parents=True)
    (run / "config.yaml").write_text(f"data:\n  dataset: {dataset}\nloss:\n  name: {loss}\n")
    test = {
        "t2v": {f"R{k}": v for k, v in zip((1, 5, 10, 50), r_at, strict=False)} | {"MdR": 3.0},
        "v2t": {"R1": 1.0},
    }
    if per_language:
        test["per_language"] = per_language
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
    assert [line.get_label() for line in curve.axes[0].lines] == ["a-run (mm)", "b-run (mm)"]
    assert runs_table(tmp_path / "missing").empty


def test_each_loss_gets_its_own_loss_panel_and_languages_their_table(tmp_path):
    write_run(tmp_path, "mm-run", (10.0, 30.0, 50.0, 90.0), [0.2, 0.1])
    write_run(tmp_path, "po-run", (10.0, 30.0, 50.0, 90.0), [9.0, 8.0], loss="po",
              per_language={"mr": {"R1": 12.5, "R5": 40.0, "R10": 60.0, "MdR": 7.0},
                            "ta": {"R1": 3.0, "R10": 20.0}})
    write_run(tmp_path, "po-run-2", (10.0, 30.0, 50.0, 90.0), [7.0], loss="po")
    _, _, loss = plot_runs(tmp_path, ["mm-run", "po-run", "po-run-2"])
    panels = {ax.get_title(): [line.get_label() for line in ax.lines] for ax in loss.axes}
    assert panels == {"Training loss: mm": ["mm-run"],
                      "Training loss: po": ["po-run", "po-run-2"]}
    assert {ax.get_ylabel() for ax in loss.axes} == {"mm loss", "po loss"}
    table = per_language_table(tmp_path)
    assert table[["run", "loss", "language"]].values.tolist() == [
        ["po-run", "po", "mr"], ["po-run", "po", "ta"]
    ]
    assert table["t2v R1"].tolist() == [12.5, 3.0] and table["t2v R10"].tolist() == [60.0, 20.0]
    assert table["t2v MdR"].isna().tolist() == [False, True]


def test_results_table_without_runs_keeps_its_key_columns(tmp_path):
    assert list(runs_table(tmp_path).columns) == ["run", "dataset", "loss", "best epoch"]
