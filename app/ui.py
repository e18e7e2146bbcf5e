"""Assemble the app (:func:`build_app`) and serve it (:func:`launch_app`).

``build_app`` takes the model objects directly (a model, its vocabulary, a dataset folder),
so tests build the app with a small randomly initialised model and no run directory;
``python -m app`` passes the objects of a loaded run.
"""

from __future__ import annotations

from pathlib import Path

from rudder.data.layout import DatasetFolder
from rudder.languages import SUPPORTED
from rudder.optional import require

from .annotate_handlers import AnnotateTab
from .annotate_layout import KEYBOARD_JS, build_annotate_tab
from .annotations_db import AnnotationStore
from .collection import Collection
from .engine import SearchEngine
from .escaping import markdown_text
from .results_tab import ResultsTab
from .search_tab import SearchTab, default_translator

CSS = """
.rudder-text { font-size: 1.25rem; margin: 0.3rem 0; }
.rudder-label { color: var(--body-text-color-subdued); font-size: 0.85rem; }
.rudder-query, .rudder-candidate {
  border: 1px solid var(--border-color-primary); border-radius: 8px; padding: 0.6rem;
}
.rudder-candidate { border-color: var(--color-accent); }
.rudder-captions td, .rudder-captions th { padding: 0.2rem 0.5rem; text-align: left; }
.rudder-captions tr.chosen { background: var(--color-accent-soft); }
.rudder-lang { font-family: monospace; margin-right: 0.4rem; }
.rudder-others-row { display: flex; gap: 1rem; }
.rudder-others-row > details { flex: 1; }
"""
# Latin fallbacks before the Indic ones (Lohit fonts carry odd Latin glyphs); Devanagari,
# Tamil and Telugu characters fall through to the Lohit fonts.
FONTS = (
    "Liberation Sans",
    "DejaVu Sans",
    "Arial",
    "Lohit Devanagari",
    "Lohit Tamil",
    "Lohit Telugu",
    "sans-serif",
)


def build_app(
    model,
    vocab,
    dataset: DatasetFolder,
    *,
    db_path,
    runs_dir="runs",
    media_dir=None,
    encode=None,
    model_key: str | None = None,
    index=None,
    cache_dir=None,
    max_words: int = 30,
    max_frames: int = 32,
    annotate_datasets=(),
    translator=None,
    description: str = "",
    train_langs=SUPPORTED,
    check_words: bool = True,
    text_encoder: str | None = None,
):
    """The Gradio app over ``dataset`` searched with ``model``.

    ``encode(texts, langs) -> (tokens, mask)`` tokenises queries (default: per-language
    tokenizer + ``vocab.batch``); ``model_key`` names the weights in the index cache
    (default: a hash of the weights); ``annotate_datasets`` are further dataset folders
    offered for annotation; ``translator(text, src, dest)`` replaces Google Translate;
    ``train_langs`` are the model's training caption languages and ``check_words=False``
    turns off the out-of-vocabulary warning (for a frozen pretrained text encoder);
    ``text_encoder`` is the run's ``data.text_encoder`` (the untrained-language warning says
    when a multilingual one covers the query's language).
    """
    gr = require("gradio", "app")

    collection = Collection(dataset, media_dir)
    engine = SearchEngine(
        model,
        vocab,
        collection,
        index=index,
        encode=encode,
        max_words=max_words,
        max_frames=max_frames,
        model_key=model_key,
        cache_dir=cache_dir,
        train_langs=train_langs,
        check_words=check_words,
        text_encoder=text_encoder,
    )
    collections = {collection.name: collection}
    for folder in annotate_datasets:
        extra = Collection(folder)
        collections.setdefault(extra.name, extra)
    search = SearchTab(engine, translator or default_translator)
    annotate = AnnotateTab(AnnotationStore(db_path), collections)
    results = ResultsTab(runs_dir)
    with gr.Blocks(title="rudder", analytics_enabled=False) as demo:
        gr.Markdown(
            f"## rudder: cross-lingual video search and partial-match annotation\n"
            f"Dataset **{markdown_text(collection.name)}**: {len(collection.videos)} videos, "
            f"{len(collection.captions)} captions in {', '.join(collection.languages)}; "
            f"experts {', '.join(engine.index.experts)}. {markdown_text(description)}"
        )
        gr.HTML("", js_on_load=KEYBOARD_JS, elem_id="rudder-keys")
        with gr.Tabs():
            with gr.Tab("Search", id="search"):
                search.build()
            with gr.Tab("Annotate", id="annotate"):
                build_annotate_tab(annotate, demo)
            with gr.Tab("Results", id="results"):
                results.build(demo)
    demo.queue(default_concurrency_limit=4)
    demo.rudder_media_dir = collection.media_dir
    return demo


def launch_app(
    demo,
    host: str = "127.0.0.1",
    port: int | None = None,
    auth: tuple[str, str] | None = None,
    prevent_thread_lock: bool = False,
    quiet: bool = False,
):
    """Serve ``demo``; only its media folder (if any) is exposed as files."""
    gr = require("gradio", "app")

    media = getattr(demo, "rudder_media_dir", None)
    theme = gr.themes.Default(font=[gr.themes.LocalFont("IBM Plex Sans"), *FONTS])
    return demo.launch(
        server_name=host,
        server_port=port,
        auth=auth,
        allowed_paths=[str(Path(media))] if media else [],
        theme=theme,
        css=CSS,
        show_error=True,
        ssr_mode=False,
        mcp_server=False,
        share=False,
        inbrowser=False,
        enable_monitoring=False,
        pwa=False,
        prevent_thread_lock=prevent_thread_lock,
        quiet=quiet,
    )
