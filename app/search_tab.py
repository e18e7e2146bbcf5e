"""The search tab: a query in any supported language -> ranked videos, a player, captions.

:class:`SearchTab` holds the handlers as plain methods (tested without a browser);
:meth:`SearchTab.build` lays out the Gradio components and wires every event with an
``api_name``.
"""

from __future__ import annotations

from urllib.parse import quote

import pandas as pd

from rudder.languages import NAMES, SUPPORTED, LanguageGuess, check_language, identify_language
from rudder.text.encoders import MULTILINGUAL
from rudder.translate import TranslationUnavailable, translate_texts

from .engine import Coverage, SearchEngine
from .escaping import MAX_QUERY_CHARS, cap_query, html_text, markdown_text, user_error

RESULT_COLUMNS = ["rank", "video", "caption", "lang", "segment (s)", "score", "experts"]
AUTO = "auto"
TRANSLATE_TIMEOUT = 4.0
UNSURE = 0.8  # below this detection confidence the page suggests choosing the language


def detection_note(guess: LanguageGuess) -> str:
    """How the query language was detected: the confidence, or why English is assumed."""
    if guess.lang is None:
        why = (
            f"no supported language is written in {guess.script} script"
            if guess.script
            else "the query has no letters"
        )
        return f"searched as English: {why}; choose its language"
    note = f"detected from its words and script, {guess.confidence:.0%} confident"
    if guess.confidence < UNSURE:
        others = ", ".join(f"{NAMES[lang]} {p:.0%}" for lang, p in guess.candidates[1:])
        note += f" ({others}); choose the language if it is wrong"
    return note


def default_translator(text: str, src: str, dest: str) -> str:
    """Google Translate through :func:`rudder.translate.translate_texts` (cached, fails fast)."""
    return translate_texts([text], src, dest, timeout=TRANSLATE_TIMEOUT)[text]


def segment_text(start, end) -> str:
    if start is None or pd.isna(start):
        return ""
    return f"{start:.1f}–{end:.1f}"


def coverage_warning(coverage: Coverage, lang: str, train_langs, text_encoder=None) -> str:
    """A warning when the model was not trained on ``lang`` or knows few of the words;
    a multilingual ``text_encoder`` (the run's ``data.text_encoder``) covers ``lang``."""
    if not coverage.lang_trained:
        trained = ", ".join(NAMES[code] for code in train_langs)
        if text_encoder in MULTILINGUAL:
            return (
                f"ⓘ The model was not trained on {NAMES[lang]} captions (only on {trained}), "
                f"but its multilingual text encoder ({text_encoder}) covers {NAMES[lang]}: "
                "the query is matched across languages, usually less precisely than in a "
                "trained language."
            )
        return (
            f"⚠ The model was not trained on {NAMES[lang]} captions (only on {trained}): "
            "its ranking does not reflect this query. Tick “Translate the query”, or use a "
            f"model trained on {NAMES[lang]} (`python -m app` without `--checkpoint` "
            "trains one)."
        )
    if coverage.nothing_known:
        return (
            "⚠ None of the query's words is in the model's vocabulary, so no video can be "
            "ranked for it: try other words."
        )
    if coverage.mostly_unknown:
        unknown = ", ".join(coverage.unknown[:8])
        return (
            f"⚠ {len(coverage.unknown)} of the query's {len(coverage.words)} words are unknown "
            f"to the model ({markdown_text(unknown)}): the ranking rests on the others."
        )
    return ""


class SearchTab:
    """Handlers of the search tab over one :class:`SearchEngine`."""

    def __init__(self, engine: SearchEngine, translator=default_translator):
        self.engine = engine
        self.collection = engine.collection
        self.translator = translator

    def search(
        self, query, lang_choice=AUTO, display_lang="en", k=10, translate=False, target="en"
    ):
        """-> (status markdown, results table, result choices update, player html)."""
        import gradio as gr

        try:
            query = cap_query(query)
        except ValueError:
            return (
                "Type a query to search.",
                pd.DataFrame(columns=RESULT_COLUMNS),
                gr.update(choices=[], value=None),
                "",
            )
        try:
            if lang_choice == AUTO:
                guess = identify_language(query)
                lang = guess.lang or "en"
            else:
                guess, lang = None, check_language(lang_choice, "the query language")
            display_lang = check_language(display_lang, "the display language")
            target = check_language(target, "the translation target")
        except ValueError as error:
            raise user_error(str(error)) from None
        how = detection_note(guess) if guess else "chosen"
        notes = [f"Query language: **{NAMES[lang]}** ({how})."]
        if translate and target != lang:
            try:
                translated = self.translator(query, lang, target)
                notes.append(f"Translated to {NAMES[target]}: “{markdown_text(translated)}”.")
                query, lang = cap_query(translated), target
            except (TranslationUnavailable, ValueError) as error:
                notes.append(f"⚠ Translation unavailable: {markdown_text(error)}")
        coverage = self.engine.coverage(query, lang)
        warning = coverage_warning(coverage, lang, self.engine.train_langs,
                                   getattr(self.engine, "text_encoder", None))
        if warning:
            notes.append(warning)
        if coverage.nothing_known:
            return (
                " ".join(notes),
                pd.DataFrame(columns=RESULT_COLUMNS),
                gr.update(choices=[], value=None),
                "",
            )
        hits = self.engine.search(query, lang, int(k), display_lang)
        rows = [
            [
                h.rank,
                h.video_id,
                h.caption,
                h.caption_lang or "",
                segment_text(h.start, h.end),
                round(h.score, 4),
                ", ".join(h.experts),
            ]
            for h in hits
        ]
        missing = sum(h.caption_lang != display_lang for h in hits)
        if missing:
            notes.append(
                f"{missing} video(s) have no {NAMES[display_lang]} caption; "
                "their closest caption is shown."
            )
        choices = [(f"{h.rank}. {h.video_id}", h.caption_id or h.video_id) for h in hits]
        first = choices[0][1] if choices else None
        player = self.player(first) if first else ""
        return (
            " ".join(notes),
            pd.DataFrame(rows, columns=RESULT_COLUMNS),
            gr.update(choices=choices, value=first),
            player,
        )

    def player(self, caption_or_video_id) -> str:
        """HTML: the video (from the media folder) at the caption's segment, and its captions."""
        if not caption_or_video_id:
            return ""
        collection = self.collection
        if caption_or_video_id in collection.row_of.index:
            chosen = collection.caption(caption_or_video_id)
            video_id = chosen["video_id"]
        elif caption_or_video_id in collection.videos.index:
            chosen, video_id = None, caption_or_video_id
        else:
            raise user_error(f"unknown caption or video id {caption_or_video_id!r}")
        parts = [f"<div class='rudder-player'><h4>{html_text(video_id)}</h4>"]
        path = collection.media_path(video_id)
        fragment = "" if chosen is None else f"#t={chosen['start']:.2f},{chosen['end']:.2f}"
        if path is not None:
            src = "gradio_api/file=" + quote(str(path), safe="/") + fragment
            parts.append(
                f"<video controls preload='metadata' width='100%' src='{html_text(src)}'></video>"
            )
        elif collection.media_dir is not None:
            parts.append(f"<p>No video file for {html_text(video_id)} in the media folder.</p>")
        else:
            parts.append(
                "<p>No media folder: start the app with <code>--media DIR</code> holding "
                "<code>&lt;video_id&gt;.mp4</code> files to play videos.</p>"
            )
        parts.append(
            "<table class='rudder-captions'>"
            "<tr><th>lang</th><th>segment (s)</th><th>caption</th></tr>"
        )
        for row in map(collection.record, collection.caption_rows(video_id)):
            mark = (
                " class='chosen'"
                if chosen is not None and row["caption_id"] == chosen["caption_id"]
                else ""
            )
            parts.append(
                f"<tr{mark}><td>{html_text(row['lang'])}</td>"
                f"<td>{html_text(segment_text(row['start'], row['end']))}</td>"
                f"<td lang='{html_text(row['lang'])}'>{html_text(row['text'])}</td></tr>"
            )
        parts.append("</table></div>")
        return "".join(parts)

    def build(self) -> None:
        """Lay out the tab's components inside the current ``gr.Blocks`` and wire events."""
        import gradio as gr

        languages = [(f"{NAMES[c]} ({c})", c) for c in SUPPORTED]
        with gr.Row():
            query = gr.Textbox(
                label="Query",
                placeholder="e.g. कागदाची होडी बनवा",
                max_length=MAX_QUERY_CHARS,
                scale=4,
                elem_id="search-query",
                submit_btn=False,
            )
            lang = gr.Dropdown(
                [("Detect (words and script)", AUTO), *languages],
                value=AUTO,
                label="Query language",
                elem_id="search-lang",
            )
            display = gr.Dropdown(
                languages, value="en", label="Show captions in", elem_id="search-display"
            )
        with gr.Row():
            k = gr.Slider(1, 50, value=10, step=1, label="Results (k)", elem_id="search-k")
            translate = gr.Checkbox(
                label="Translate the query (Google Translate, needs the internet)",
                value=False,
                elem_id="search-translate",
            )
            target = gr.Dropdown(
                languages, value="en", label="Translate to", elem_id="search-target"
            )
            button = gr.Button("Search", variant="primary", elem_id="search-button")
        status = gr.Markdown(elem_id="search-status")
        table = gr.Dataframe(
            headers=RESULT_COLUMNS,
            datatype=["number", "str", "str", "str", "str", "number", "str"],
            interactive=False,
            wrap=True,
            label="Ranked videos",
            elem_id="search-results",
        )
        pick = gr.Dropdown(
            choices=[], label="Play result", allow_custom_value=True, elem_id="search-pick"
        )
        player = gr.HTML(elem_id="search-player")

        inputs = [query, lang, display, k, translate, target]
        outputs = [status, table, pick, player]
        button.click(self.search, inputs, outputs, api_name="search")
        query.submit(self.search, inputs, outputs, api_name="search_submit")
        display.change(self.search, inputs, outputs, api_name="change_display_language")
        pick.input(self.player, pick, player, api_name="play")
