"""A loaded run as the app serves it: its search engine over the app's collection and the
header's line about it (used at start-up and when the app switches to a retrained run)."""

from __future__ import annotations

from datetime import datetime, timezone
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from rudder.runs.trained_model import TrainedModel


def model_description(run) -> str:
    """The header's line about the model: architecture, loss, languages, when, which run."""
    from rudder.languages import NAMES

    config = run.config
    loss = getattr(getattr(config, "loss", None), "name", None)
    langs = ", ".join(NAMES.get(c, c) for c in config.data.caption_langs)
    try:
        stamp = datetime.fromtimestamp(Path(run.checkpoint).stat().st_mtime, timezone.utc)
        when = f", trained {stamp:%Y-%m-%d %H:%M} UTC"
    except OSError:
        when = ""
    with_loss = f" with the {loss} loss" if loss else ""
    name = getattr(run, "source", None) or run.run_dir.name  # a Hub model: pinned to its commit
    return f"Collaborative Experts{with_loss} on {langs} captions{when} ({name})"


def engine_for(run: TrainedModel, collection, index=None, cache_dir=None):
    """The search engine of a loaded model over the app's collection: its queries encoded by
    the model's text side, its index cached under its checkpoint's fingerprint."""
    from .engine import SearchEngine

    return SearchEngine(
        run.model,
        run.vocab,
        collection,
        index=index,
        encode=run.encode_queries,
        model_key=run.fingerprint,
        cache_dir=cache_dir,
        max_words=run.config.data.max_words,
        max_frames=run.config.data.max_frames,
        train_langs=run.config.data.caption_langs,
        check_words=run.reads_tokens,
        text_encoder=run.config.data.text_encoder,
        fitted_langs=fitted_langs(run),
    )


def fitted_langs(run) -> list[str]:
    """The languages whose text fitted the run's text-side statistics without being training
    captions (a query in one is not zero-shot)."""
    from rudder.evaluation.query_langs import SENTENCE_TRANSFORMS, langs_read

    names = ("caption_langs", "sentence_fit_langs", "sentence_fit_text", *SENTENCE_TRANSFORMS)
    data = {name: getattr(run.config.data, name, None) for name in names}
    trained = data["caption_langs"] or []
    return [lang for lang in langs_read(data) if lang not in trained]
