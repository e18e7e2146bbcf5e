"""The search page's handlers: examples, messages, the URL, row clicks, thumbnails, header."""

import json
import shutil
import time
from types import SimpleNamespace

import pytest

from app.collection import Collection
from app.engine import SearchEngine
from app.model_slot import ModelSlot
from app.query_language import query_language
from app.search_tab import MAX_QUERY_CHARS, SearchTab, examples_of
from app.thumbnails import Thumbnails, frame_at
from app.ui import header_markdown
from rudder.data.layout import DatasetFolder

from .videos import SEGMENTS, write_video


@pytest.fixture(scope="module")
def collection(app_dataset, media_dir):
    return Collection(app_dataset, media_dir)


@pytest.fixture(scope="module")
def tab(collection, model_and_vocab, tmp_path_factory):
    model, vocab = model_and_vocab
    tmp = tmp_path_factory.mktemp("search-page")
    engine = SearchEngine(model, vocab, collection, cache_dir=tmp / "index")
    return SearchTab(engine, collection=collection, thumbnails=Thumbnails(tmp / "thumbs"))


def test_examples_one_per_language_and_one_cross_lingual(collection):
    examples = examples_of(collection)
    assert [e.lang for e in examples] == ["mr", "hi", "ta", "te", "en", "mr"]
    assert [e.display for e in examples] == ["mr", "hi", "ta", "te", "en", "en"]
    texts = set(collection.captions["text"])
    for example in examples:
        assert example.query in texts  # a caption of the dataset: it finds its videos
        assert example.query in example.label
    assert examples[-1].label.startswith("Marathi → English")
    assert examples[-1].query != examples[0].query


@pytest.mark.parametrize(
    "query, expected",
    [
        ("🙂🙂 !!! 123", "Nothing to search for: the query has no letters"),
        ("... ??? ---", "Nothing to search for"),
        ("折纸船", "written in Han \\(Chinese characters\\), a script this model does not"),
        ("бумажная лодка", "written in Cyrillic"),
    ],
)
def test_queries_with_nothing_to_search_say_so_and_return_nothing(tab, query, expected):
    status, table, pick = tab.search(query)
    assert expected in status and table.empty and pick["value"] is None
    assert tab.player(pick["value"]) == ""  # the page's player, emptied after it
    if "script" in expected:
        assert "Hindi and Marathi (Devanagari)" in status and "English (Latin)" in status


def test_a_long_query_is_cut_and_the_page_says_the_limit(tab):
    query = "fold the paper." * 400  # 6,000 characters
    status, table, _ = tab.search(query)
    assert f"only its first {MAX_QUERY_CHARS} were searched" in status
    assert "6,000 characters" in status and len(table) == 10
    status, _, _ = tab.search("fold the paper")
    assert "were searched" not in status


def test_the_query_language_reads_scripts():
    marathi = query_language("कागद दुमडा")
    assert marathi.lang == "mr" and [code for code, _ in marathi.candidates] == ["mr", "hi"]
    assert query_language("fold the paper").lang == "en"
    assert query_language("మడవండి").lang == "te"
    assert query_language("折纸船").lang == "zh"  # read by a multilingual encoder only
    assert query_language("ಕಾಗದವನ್ನು ಮಡಿಸಿ").lang == "kn"
    cyrillic = query_language("бумажная лодка")
    assert cyrillic.lang is None and "Cyrillic" in cyrillic.script
    assert query_language("🙂 !!").nothing_searchable


def test_a_search_in_the_url_fills_the_fields_and_runs(tab):
    request = SimpleNamespace(query_params={"q": "कागद दुमडा", "display": "hi", "k": "4"})
    query, lang, display, k, status, table, *_ = tab.from_url(request)
    assert (query, lang, display, k) == ("कागद दुमडा", "auto", "hi", 4)
    assert "Marathi" in status and len(table) == 4 and set(table["lang"]) == {"hi"}
    assert "detected from its words and script, 99% confident" in status
    bad = SimpleNamespace(query_params={"q": "paper", "lang": "fr", "display": "xx", "k": "x"})
    assert tab.from_url(bad)[:4] == ("paper", "auto", "en", 10)
    nothing = tab.from_url(SimpleNamespace(query_params={}))
    assert all(value == {"__type__": "update"} for value in nothing)


def test_clicking_a_row_plays_its_caption_and_captions_seek(tab, collection):
    _, table, _ = tab.search("कागद दुमडा", display_lang="hi", k=5)
    row = table.iloc[2].tolist()
    assert table.columns[0] == "thumbnail"
    pick, player = tab.play_row(row)
    row = row[1:]
    expected = next(
        c for c in collection.captions.itertuples()
        if c.video_id == row[1] and c.lang == "hi" and c.text == row[2]
    )
    assert pick["value"] == expected.caption_id
    assert f"<h4>{row[1]}</h4>" in player
    assert player.count("data-start=") == len(collection.caption_rows(row[1]))
    assert "class='chosen' data-start" in player
    assert tab.play_row([None] * 8) == ({"__type__": "update"},) * 2


def test_the_player_plays_the_segment_of_a_real_file(tab, media_dir):
    html = tab.player("v001-en")  # segment 1.0-4.5 s
    assert "#t=1.00,4.50" in html and "data-segment-end='4.50'" in html
    assert "max-height:220px" in html and "<video" in html


def test_thumbnails_show_the_segment_middle_frame_and_are_cached(tmp_path):
    video = write_video(tmp_path / "clip.mp4")
    thumbs = Thumbnails(tmp_path / "thumbs", width=32)
    first = thumbs.path(video, 0.0, 5.0)
    second = thumbs.path(video, 5.0, 10.0)
    assert first != second and first.suffix == ".jpg"
    from PIL import Image

    red, blue = (Image.open(p).convert("RGB").getpixel((16, 12)) for p in (first, second))
    assert red[0] > 180 and red[2] < 80 and blue[2] > 180 and blue[0] < 80
    assert Image.open(first).size == (32, 24)
    stamp = first.stat().st_mtime_ns
    time.sleep(0.01)
    assert thumbs.path(video, 0.0, 5.0) == first and first.stat().st_mtime_ns == stamp
    for start, end, rgb in SEGMENTS:  # frame_at reads the frame at the time asked
        pixel = frame_at(video, (start + end) / 2).getpixel((5, 5))
        assert max(abs(a - b) for a, b in zip(pixel, rgb, strict=False)) < 40
    broken = tmp_path / "broken.mp4"
    broken.write_bytes(b"not a video")
    assert thumbs.path(broken, 0, 1) is None and thumbs.path(tmp_path / "none.mp4", 0, 1) is None


def test_result_rows_carry_thumbnails_of_decodable_files(tab):
    import asyncio

    _, table, _ = tab.search("fold the paper", k=30)
    filled = asyncio.run(tab.fill_thumbnails(table))  # the follow-up event of a search
    table = table if isinstance(filled, dict) else filled  # a dict: nothing was pending
    cells = dict(zip(table["video"], table["thumbnail"], strict=True))
    assert cells["v000"].startswith("![segment of v000](gradio_api/file=")
    assert cells["v001"].endswith(".jpg)")
    assert cells["v004"] == "" and cells["v002"] == ""  # broken file, no file


def test_a_pending_model_says_it_is_training(collection, tmp_path):
    run = tmp_path / "run"
    run.mkdir()
    slot = ModelSlot(run_dir=run, epochs=3)
    tab = SearchTab(slot, collection=collection)
    status, table, _ = tab.search("fold the paper")
    assert "A first model is training" in status and "0 of at most 3 epochs done" in status
    assert table.empty and "Annotate and Results tabs work now" in status
    slot.started = time.monotonic() - 20  # the first epoch took 20 s
    (run / "metrics.jsonl").write_text(json.dumps({"epoch": 1, "t2v": {}}) + "\n")
    text = slot.progress_markdown()
    assert ("epoch 2 of at most 3; 1 of at most 3 epochs done, 20 s so far, at most about 40 s of "
            "training left") in text
    assert slot.progress() == (1, 4) and "value='1' max='4'" in slot.progress_html()
    assert "Model** a first model is training" in header_markdown(collection, slot)
    slot.fail("boom")
    assert "Training the first model failed" in slot.progress_markdown()


def test_the_header_names_dataset_languages_features_and_model(collection):
    slot = ModelSlot(object(), "Collaborative Experts with the mm loss on Marathi captions")
    text = header_markdown(collection, slot)
    assert "app\\-test" in text and "30 videos, 150 captions" in text
    assert "English, Hindi, Marathi, Tamil, Telugu" in text
    assert "audio \\(mr\\)" in text and "audio@mr" not in text  # Markdown-escaped
    assert "with the mm loss on Marathi captions" in text


@pytest.mark.slow
def test_every_example_finds_its_videos_on_the_sample_with_the_quick_model(tmp_path):
    """The examples of the sample searched with the model ``python -m app`` trains first:
    each finds, among its top 5, a video with a caption saying what the example says."""
    import app.__main__ as cli
    from rudder.data.lookup import resolve_dataset
    from rudder.evaluation.loading import load_run

    folder = resolve_dataset("sample")
    run = load_run(cli.train_quick(tmp_path / "runs", "sample", 2, folder.meta.languages))
    collection = Collection(folder)
    tab = SearchTab(cli.engine_for(run, collection), collection=collection)
    captions = collection.captions.assign(short=collection.captions["text"].str.rstrip(".।"))
    assert len(tab.examples) == 6
    for example in tab.examples:
        status, table, _ = tab.search(
            example.query, tab.example_language(example), example.display, k=5
        )
        assert "⚠" not in status, (example, status)
        matching = set(captions.loc[captions["short"] == example.query, "video_id"])
        assert matching & set(table["video"]), (example, table["video"].tolist())
        # Each hit is shown in the display language wherever its video has a caption in it
        # (Tamil and Telugu cover 40% of the sample's videos; the others fall back).
        shown = captions[captions["lang"] == example.display]
        has_display = set(shown["video_id"])
        for video, lang in zip(table["video"], table["lang"], strict=True):
            assert lang == example.display or video not in has_display, (example, video, lang)
        assert example.display in set(table["lang"]), (example, table["lang"].tolist())


def test_videos_built_from_files_play_the_file_the_dataset_names(segment_dataset, tmp_path):
    """``build videos`` records each video's source file in rudder.json ``extra.media``."""
    root = tmp_path / "built"
    shutil.copytree(segment_dataset.root, root)
    meta = json.loads((root / "rudder.json").read_text(encoding="utf-8"))
    meta["extra"] = {"media": {"s00": {"file": "clip one.webm", "start": 0.0, "end": 10.0},
                               "s01": {"file": "../outside.mp4"}, "s02": "bad entry"}}
    (root / "rudder.json").write_text(json.dumps(meta), encoding="utf-8")
    media = tmp_path / "media"
    media.mkdir()
    write_video(media / "clip one.webm")
    write_video(tmp_path / "outside.mp4")
    write_video(media / "s02.mp4")
    collection = Collection(DatasetFolder(root), media)
    assert collection.media_path("s00") == media / "clip one.webm"
    assert collection.media_path("s01") is None  # never outside the media folder
    assert collection.media_path("s02") == media / "s02.mp4"
    tab = SearchTab(ModelSlot(run_dir=tmp_path, epochs=1), collection=collection,
                    thumbnails=Thumbnails(tmp_path / "thumbs"))
    html = tab.player("s00-en-1")  # the second segment, 5-10 s of the file
    assert "clip%20one.webm#t=5.00,10.00" in html
    assert tab.thumbnail_markdown("s00", 5.0, 10.0).endswith(".jpg)")
