"""Assemble the app (:func:`build_app`) and serve it (:func:`launch_app`).

``build_app`` takes the model objects directly (a model, its vocabulary, a dataset folder),
so tests build the app with a small randomly initialised model and no run directory;
``python -m app`` passes the objects of a loaded run.
"""

from __future__ import annotations

import importlib.util
import sys
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING

from rudder.data.layout import DatasetFolder
from rudder.languages import NAMES, SUPPORTED
from rudder.optional import require

from .annotate_handlers import AnnotateTab
from .annotate_layout import KEYBOARD_JS, build_annotate_tab, remembered_name
from .annotations_db import AnnotationStore
from .collection import Collection
from .engine import SearchEngine
from .escaping import markdown_text
from .model_slot import ModelSlot
from .playback import PLAYBACK_JS, Playback, register_media_types
from .queue_service import DOUBLE_SHARE, QueueService
from .results_tab import ResultsTab
from .retrain import Retrainer, RetrainSettings, read_record
from .search_tab import SearchTab, default_translator
from .thumbnails import Thumbnails

if TYPE_CHECKING:
    from rudder.runs.trained_model import TrainedModel

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
.rudder-others-row { display: flex; gap: 1rem; flex-wrap: wrap; }
.rudder-others-row > details { flex: 1; min-width: 260px; }
.rudder-captions tr[data-start] { cursor: pointer; }
.rudder-captions tr[data-start]:hover { background: var(--background-fill-secondary); }
#search-results tbody tr { cursor: pointer; }
#search-results img { max-width: 96px; height: auto; display: block; }
#search-examples { flex-wrap: wrap; gap: 0.4rem; align-items: center; }
#search-examples > * { flex: 0 1 auto !important; min-width: 0 !important; }
.rudder-examples-label { flex: 0 0 auto !important; }
#rudder-notice { border: 2px solid #d97706; border-radius: 8px; padding: 0.4rem 0.8rem;
  background: #fff7ed; color: #7c2d12; }
#rudder-header h2 { margin: 0.2rem 0; }
.rudder-segment video { width: 100%; max-height: 160px; background: #000; }
/* The label buttons stay in view: a bar fixed to the bottom of the window, and a spacer
   at the end of the tab so that nothing stays hidden under it. */
#rudder-keys, #rudder-playback { display: none; }  /* scripts only: no space */
#ann-bar { position: fixed; left: 0; right: 0; bottom: 0; z-index: 50; gap: 0.2rem;
  padding: 0.3rem max(0.8rem, calc((100vw - 1280px) / 2));
  background: var(--background-fill-primary);
  border-top: 1px solid var(--border-color-primary); box-shadow: 0 -2px 6px rgba(0,0,0,.08); }
#ann-spacer { height: 130px; }
#ann-cards { flex-wrap: wrap; }
#ann-query, #ann-candidate { flex: 1 1 300px !important; min-width: min(300px, 100%) !important; }
#ann-buttons { flex-wrap: wrap; gap: 0.3rem; }
#ann-buttons > button { flex: 1 1 14% !important; min-width: 70px !important; }
#ann-definitions { font-size: 0.85rem; line-height: 1.25; }
#ann-definitions dl { display: grid; grid-template-columns: repeat(2, max-content 1fr);
  gap: 0 0.6rem; margin: 0; }
#ann-definitions dt { font-weight: 600; }
#ann-definitions dd { margin: 0; }
@media (max-width: 640px) {
  #ann-buttons > button { flex: 1 1 30% !important; padding: 0.3rem 0.1rem !important;
    font-size: 0.8rem !important; min-height: 0 !important; }
  #ann-definitions, #ann-definitions * { font-size: 0.72rem !important; line-height: 1.2; }
  #ann-definitions dl { grid-template-columns: max-content 1fr; }
  #ann-spacer { height: 170px; }
  .rudder-text { font-size: 1.05rem; }
}
"""
# Gradio's queue: events run at most 4 at a time each (benchmarks/bench_app_search.py serves
# its do-nothing endpoint with the same settings).
QUEUE_SETTINGS = {"default_concurrency_limit": 4}
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
    fitted_langs=(),
    trained: TrainedModel | None = None,
    pending: ModelSlot | None = None,
    thumbnail_dir=None,
    playback_dir=None,
    double_share: float = DOUBLE_SHARE,
    retrain: RetrainSettings | None = None,
):
    """The Gradio app over ``dataset`` searched with ``model``.

    ``encode(texts, langs) -> (tokens, mask)`` tokenises queries (default: per-language
    tokenizer + ``vocab.batch``); ``model_key`` names the weights in the index cache
    (default: a hash of the weights); ``annotate_datasets`` are further dataset folders
    offered for annotation; ``translator(text, src, dest)`` replaces Google Translate;
    ``train_langs`` are the model's training caption languages and ``check_words=False``
    turns off the out-of-vocabulary warning (for a frozen pretrained text encoder);
    ``text_encoder`` is the run's ``data.text_encoder`` (the untrained-language warning says
    when a multilingual one covers the query's language) and ``fitted_langs`` the languages
    whose text fitted its statistics without training captions (not labelled zero-shot).
    With ``trained`` (a loaded :class:`~rudder.runs.trained_model.TrainedModel`) ``model``
    and ``vocab`` are None and the engine is :func:`app.served_run.engine_for` (these
    settings come from the model). With ``pending`` (a :class:`ModelSlot` a training thread
    fills later) ``model`` and ``vocab`` are None: the page is served at once and says that
    the model is training.
    ``description`` says which model searches (the header shows it); thumbnails of
    ``--media`` videos are cached in ``thumbnail_dir`` (default ``$RUDDER_CACHE/thumbnails``),
    browser-playable copies of the files browsers cannot play in ``playback_dir`` (default
    ``$RUDDER_CACHE/playback``). ``double_share`` of the queue pairs go to two annotators;
    with ``retrain`` the annotation tab can retrain the model on the settled labels and switch
    to the new run.
    """
    gr = require("gradio", "app")

    collection = Collection(dataset, media_dir)
    if pending is None and trained is not None:
        from .served_run import engine_for

        pending = ModelSlot(engine_for(trained, collection, index=index, cache_dir=cache_dir),
                            description)
    elif pending is None:
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
            fitted_langs=fitted_langs,
        )
        pending = ModelSlot(engine, description)
    collections = {collection.name: collection}
    for folder in annotate_datasets:
        extra = Collection(folder)
        collections.setdefault(extra.name, extra)
    thumbnails = None
    if collection.media_dir is not None:
        if importlib.util.find_spec("av") is None:
            print("note: no thumbnails: --media thumbnails need PyAV (pip install av)",
                  file=sys.stderr)
        else:
            thumbnails = Thumbnails(thumbnail_dir)
            collection.playback = Playback(playback_dir)
    search = SearchTab(
        pending, translator or default_translator, collection=collection, thumbnails=thumbnails
    )
    store = AnnotationStore(db_path)
    queues = QueueService(
        store, collections, lambda name: pending.engine if name == collection.name else None,
        share=double_share,
    )
    annotate = AnnotateTab(store, collections, queues=queues)
    retrainer = None
    if retrain is not None:
        settings = replace(retrain, name=retrain.name or collection.name)
        retrainer = Retrainer(settings, store, lambda run: switch_run(run, settings.dataset,
                                                                     collection, pending, queues))
    results = ResultsTab(runs_dir)
    with gr.Blocks(title=f"rudder: {collection.name}", analytics_enabled=False) as demo:
        header = gr.Markdown(header_markdown(collection, pending), elem_id="rudder-header")
        if dataset.meta.simulated:
            gr.HTML(SIMULATED_NOTICE, elem_id="rudder-notice")
        training = gr.Markdown(
            pending.progress_markdown(), elem_id="rudder-training", visible=not pending.ready
        )
        bar = gr.HTML(
            pending.progress_html(), elem_id="rudder-training-progress", visible=not pending.ready
        )
        gr.HTML("", js_on_load=KEYBOARD_JS, elem_id="rudder-keys")
        gr.HTML("", js_on_load=PLAYBACK_JS, elem_id="rudder-playback")
        remembered = remembered_name()
        with gr.Tabs():
            with gr.Tab("Search", id="search"):
                search.build()
            with gr.Tab("Annotate", id="annotate"):
                build_annotate_tab(annotate, demo, remembered, retrainer,
                                   (header, lambda: header_markdown(collection, pending)))
            with gr.Tab("Results", id="results"):
                results.build(demo)
        timer = gr.Timer(1.0, active=not pending.ready)

        def tick():
            waiting = not pending.ready
            if not waiting:
                queues.prepare(collection.name)  # the model queue, now that a model serves
            return (
                header_markdown(collection, pending),
                gr.update(value=pending.progress_markdown(), visible=waiting),
                gr.update(value=pending.progress_html(), visible=waiting),
                gr.Timer(active=not (pending.ready or pending.error)),
            )

        timer.tick(tick, None, [header, training, bar, timer], api_visibility="private",
                   queue=False)
        open_url, outputs = search.load_event
        search.after_load(demo.load(open_url, None, outputs, api_name="open_url"))
    queues.prepare(collection.name)  # queues are built in the background, then stored
    demo.queue(**QUEUE_SETTINGS)
    demo.rudder_media_dir = collection.media_dir
    playback = collection.playback
    demo.rudder_served_dirs = [d for d in (
        collection.media_dir, thumbnails.folder if thumbnails else None,
        playback.folder if playback else None) if d]
    demo.rudder_slot = pending
    demo.rudder_collection = collection
    demo.rudder_annotate = annotate
    demo.rudder_retrainer = retrainer
    return demo


def switch_run(run_dir, dataset: str, collection: Collection, slot: ModelSlot,
               queues: QueueService) -> str:
    """Serve the retrained run ``run_dir``: search with it and rebuild the model queue;
    returns its description."""
    from rudder.evaluation.loading import load_run

    from .served_run import engine_for, model_description

    run = load_run(run_dir, dataset=dataset)
    record = read_record(run_dir) or {}
    description = (f"{model_description(run)}, retrained on {record.get('labels', '?')} "
                   f"manual labels (to {str(record.get('last_label', '?'))[:16]})")
    slot.fill(engine_for(run, collection), description)
    queues.prepare(collection.name)
    return description


SIMULATED_NOTICE = (
    "<b>Simulated data.</b> This dataset's captions and video features are generated (its "
    "rudder.json marks it simulated, as it does rudder's built-in sample): no real videos are "
    "behind them. It shows how search and annotation work; results on it say nothing about "
    "real videos."
)


def _experts_text(experts) -> str:
    """'scene, object, action, audio (hi, mr)': per-language experts grouped by kind."""
    kinds: dict[str, list[str]] = {}
    for name in experts:
        kind, _, lang = str(name).partition("@")
        kinds.setdefault(kind, [])
        if lang:
            kinds[kind].append(lang)
    return ", ".join(
        f"{kind} ({', '.join(sorted(langs))})" if langs else kind for kind, langs in kinds.items()
    )


def header_markdown(collection: Collection, slot: ModelSlot) -> str:
    """The page's header: what is searched (dataset, its languages, features) and with what
    model (:attr:`ModelSlot.description`, or that one is training)."""
    languages = ", ".join(NAMES.get(code, code) for code in collection.languages)
    experts = _experts_text(collection.folder.meta.experts)
    model = (
        markdown_text(slot.description) if slot.ready and slot.description
        else "a first model is training (see below)" if not slot.ready else ""
    )
    return (
        "## rudder: search videos across languages, label caption pairs\n"
        f"**Dataset** {markdown_text(collection.name)}: {len(collection.videos):,} videos, "
        f"{len(collection.captions):,} captions in {languages}; video features: "
        f"{markdown_text(experts)}.  \n**Model** {model}"
    )


def launch_app(
    demo,
    host: str = "127.0.0.1",
    port: int | None = None,
    auth=None,
    prevent_thread_lock: bool = False,
    quiet: bool = False,
):
    """Serve ``demo``; only its media folder (if any) is exposed as files. ``auth`` is what
    ``gr.Blocks.launch`` takes: a (user, password) pair, ``auth(user, password) -> bool``, or
    :class:`app.auth.Logins` (served throttled and off the event loop: ``Logins.login``)."""
    from .auth import gradio_auth

    gr = require("gradio", "app")
    auth, app_kwargs = gradio_auth(auth)
    served = [str(Path(d)) for d in getattr(demo, "rudder_served_dirs", []) if d]
    register_media_types()
    theme = gr.themes.Default(font=[gr.themes.LocalFont("IBM Plex Sans"), *FONTS])
    return demo.launch(
        server_name=host,
        server_port=port,
        auth=auth,
        app_kwargs=app_kwargs,
        allowed_paths=served,
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
