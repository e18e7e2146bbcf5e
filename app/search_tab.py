"""The search tab: a query in any supported language -> ranked videos, a player, captions.

:class:`SearchTab` holds the handlers as plain methods (tested without a browser);
:meth:`SearchTab.build` lays out the Gradio components and wires every event with an
``api_name``. Clicking a result row plays its segment in the player beside the results;
clicking a caption under the player seeks the video to it. The query, its language, the
display language and k are kept in the page's URL (``?q=...&lang=...&display=...&k=...``),
so a search can be shared; opening such a URL runs it.
"""

from __future__ import annotations

import sys
from dataclasses import dataclass
from typing import Any, Literal

import pandas as pd

from rudder.languages import (
    NAMES,
    SUPPORTED,
    LanguageGuess,
    check_language,
    identify_language,
    language_name,
)
from rudder.text.encoders import MULTILINGUAL, languages_read
from rudder.translate import TranslationUnavailable, translate_texts

from .engine import Coverage, SearchEngine
from .escaping import MAX_QUERY_CHARS, cap_query, html_text, markdown_text, user_error
from .model_slot import ModelSlot
from .playback import video_html
from .query_language import covered_scripts_text, query_language, script_name

RESULT_COLUMNS = ["rank", "video", "caption", "lang", "segment (s)", "score", "experts"]
THUMBNAIL_COLUMN = "thumbnail"
AUTO = "auto"
TRANSLATE_TIMEOUT = 4.0
UNSURE = 0.8  # below this detection confidence the page suggests choosing the language
THUMBNAIL_BUDGET = 0.5  # seconds a search waits for its thumbnails (the rest come later)
THUMBNAIL_WAIT = 30.0  # seconds the follow-up event waits for the thumbnails being made
ColumnType = Literal["str", "number", "markdown"]  # the results table's column types
DEFAULT_K, MAX_K = 10, 50
# The search events share one Gradio concurrency group that lets 16 run at once: searches in
# flight together share the engine's model passes (app.coalesce), so letting them in costs
# little, while queueing them behind Gradio's default limit (4) makes each wait for others.
SEARCH_QUEUE: dict[str, Any] = {"concurrency_id": "search", "concurrency_limit": 16}
# The query field accepts longer pastes than are searched, so the page can say it cut them.
FIELD_CHARS = 10 * MAX_QUERY_CHARS
# Keeps the search in the page's URL (runs in the browser before each search).
URL_JS = """(q, lang, display, k, translate, target) => {
  const url = new URL(window.location.href);
  const put = (key, value, fallback) => {
    if (value === null || value === undefined || String(value) === fallback) {
      url.searchParams.delete(key);
    } else {
      url.searchParams.set(key, String(value));
    }
  };
  put("q", (q || "").trim().slice(0, MAX_CHARS), ""); put("lang", lang, "auto");
  put("display", display, "en"); put("k", k, "10");
  window.history.replaceState(window.history.state, "", url);
  return [q, lang, display, k, translate, target];
}""".replace("MAX_CHARS", str(MAX_QUERY_CHARS))
# The player: a click on a caption row seeks the video to its segment and plays it to its end.
PLAYER_JS = """
const segmentEnd = (video) => Number(video.dataset.segmentEnd || "NaN");
element.addEventListener("timeupdate", (event) => {
  const video = event.target;
  if (video.tagName === "VIDEO" && video.currentTime >= segmentEnd(video)) {
    video.pause();
    delete video.dataset.segmentEnd;
  }
}, true);
element.addEventListener("click", (event) => {
  const row = event.target.closest("tr[data-start]");
  if (!row || !element.contains(row)) return;
  element.querySelectorAll("tr.chosen").forEach((r) => r.classList.remove("chosen"));
  row.classList.add("chosen");
  const video = element.querySelector("video");
  if (!video) return;
  video.dataset.segmentEnd = row.dataset.end;
  video.currentTime = Number(row.dataset.start);
  video.play().catch(() => {});
});
"""

# On a narrow screen the player is under the results: bring it into view after a row click.
SHOW_PLAYER_JS = """() => {
  if (window.innerWidth < 760) {
    document.querySelector("#search-player").scrollIntoView({block: "start"});
  }
}"""


@dataclass(frozen=True)
class Example:
    """A clickable example search: its button label, query, query language, display."""

    label: str
    query: str
    lang: str
    display: str


def _short_caption(text: str) -> str:
    return str(text).strip().rstrip(".।!?").strip()


def example_candidates(collection, max_words: int = 6, per_language: int = 12) -> dict:
    """Language -> its ``per_language`` most frequent captions of at most ``max_words``
    words (final punctuation dropped; ties: dataset order), for the languages of the
    collection in :data:`SUPPORTED` order."""
    texts = collection.captions["text"].map(_short_caption)
    short = texts[texts.str.split().str.len().between(1, max_words)]
    langs = collection.captions.loc[short.index, "lang"]
    ranked = {}
    for lang in [code for code in SUPPORTED if code in set(collection.languages)]:
        counts = short[langs == lang].value_counts(sort=False)
        ranked[lang] = list(counts.sort_values(ascending=False, kind="stable").index[:per_language])
    return {lang: texts for lang, texts in ranked.items() if texts}


def examples_of(collection, finds=None) -> list[Example]:
    """One example per language of the collection, shown in its own language, then one
    cross-lingual example: a caption of the first language that is not English, shown in
    English. Each is a frequent short caption (:func:`example_candidates`); with
    ``finds(query, lang, display) -> bool`` (the search finds a video the caption
    describes) the first candidate it accepts, else the most frequent."""
    ranked = example_candidates(collection)

    def first(lang, display, skip=()):
        options = [text for text in ranked[lang] if text not in skip]
        return next((t for t in options if finds is None or finds(t, lang, display)),
                    options[0] if options else None)

    examples = []
    for lang in ranked:
        examples.append(Example(f"{NAMES[lang]}: {first(lang, lang)}", first(lang, lang),
                                lang, lang))
    other = next((code for code in ranked if code != "en" and len(ranked[code]) > 1), None)
    if other is not None and "en" in ranked:
        query = first(other, "en", skip={examples[list(ranked).index(other)].query})
        examples.append(Example(f"{NAMES[other]} → English: {query}", query, other, "en"))
    return examples


def detection_note(guess: LanguageGuess) -> str:
    """How the query language was detected: the confidence, and the other candidates with a
    hint to choose the language when it is below :data:`UNSURE`."""
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


def coverage_warning(coverage: Coverage, lang: str, train_langs, text_encoder=None,
                     fitted_langs=(), translation_failed: bool = False) -> str:
    """A warning when the model was not trained on ``lang`` or knows few of the words;
    a multilingual ``text_encoder`` (the run's ``data.text_encoder``) reads ``lang``: the
    query is searched zero-shot, unless its language's text fitted the text side's
    statistics (``fitted_langs``); ``translation_failed``: the query was to be translated and
    could not be (no advice to translate it then)."""
    if not coverage.lang_trained:
        trained = ", ".join(language_name(code) for code in train_langs)
        name = language_name(lang)
        if text_encoder in MULTILINGUAL:
            how = ("its captions fitted the text statistics, no video was paired with them"
                   if lang in fitted_langs else "zero-shot")
            return (
                f"ⓘ No training captions in {name}: {how}. The model was trained on "
                f"{trained} captions; its multilingual text encoder ({text_encoder}) reads "
                f"{name}, so the query is matched across languages, usually less precisely "
                "than in a trained language."
            )
        translate = "" if translation_failed else "Tick “Translate the query”, or use"
        return (
            f"⚠ The model was not trained on {name} captions (only on {trained}): "
            f"its ranking does not reflect this query. {translate or 'Use'} a model trained "
            f"on {name} (`python -m app --quick-model` serves one that reads every language "
            "of the dataset)."
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


def unread_message(guess: LanguageGuess) -> str:
    """Why a query was not searched: its script, or its language, is one the model does not
    read (a word vocabulary reads the dataset's languages only)."""
    script = script_name(guess.script) if guess.script else "an unknown script"
    message = (f"⚠ The query is written in {markdown_text(script)}, a "
               f"script this model does not read: it reads {covered_scripts_text()}. "
               "Nothing was searched.")
    if guess.lang is not None:
        message += (f" A model on a multilingual sentence encoder reads "
                    f"{language_name(guess.lang)} without training captions in it (`python "
                    "-m rudder.train --set data.text_encoder=multilingual-e5`, or `python -m "
                    "app` with the multilingual extra installed).")
    return message


class SearchTab:
    """Handlers of the search tab over one collection and its (maybe pending) model.

    ``engine`` is a :class:`SearchEngine` or a :class:`ModelSlot` that receives one later;
    ``thumbnails`` (an :class:`app.thumbnails.Thumbnails`) adds a thumbnail column.
    """

    def __init__(self, engine, translator=default_translator, collection=None, thumbnails=None):
        self.slot = engine if isinstance(engine, ModelSlot) else ModelSlot(engine)
        self.collection = collection if collection is not None else self.slot.engine.collection
        self.translator = translator
        self.thumbnails = thumbnails if self.collection.media_dir is not None else None
        self.columns = ([THUMBNAIL_COLUMN] if self.thumbnails else []) + RESULT_COLUMNS
        self.examples = examples_of(self.collection, self._finds if self.engine else None)

    @property
    def engine(self) -> SearchEngine | None:
        return self.slot.engine

    def reads(self, lang: str) -> bool:
        """Whether the model reads ``lang``: a dataset language (an untrained one is searched
        with a warning), or any language its multilingual text encoder reads; unknown while
        the model is still training."""
        engine = self.engine
        if lang in SUPPORTED or engine is None:
            return True
        return lang in languages_read(getattr(engine, "text_encoder", None), engine.train_langs)

    def _finds(self, query: str, lang: str, display: str, k: int = 5) -> bool:
        """Whether searching ``query`` ranks, among the first ``k`` videos, one that has it
        as a caption (the ranking of :meth:`SearchEngine.search`, without picking captions)."""
        engine = self.engine
        if engine is None:
            return False
        text_emb, logits = engine.embed_texts([query], [lang])
        positions, _ = engine.rank(text_emb, logits, k)
        captions = self.collection.captions
        return any(
            _short_caption(captions["text"].iat[row]) == query
            for i in positions.tolist()
            for row in self.collection.caption_rows(engine.index.video_ids[i])
        )

    def _empty(self, status: str):
        import gradio as gr

        return status, pd.DataFrame(columns=self.columns), gr.update(choices=[], value=None)

    def search(
        self, query, lang_choice=AUTO, display_lang="en", k=DEFAULT_K, translate=False,
        target="en",
    ):
        """-> (status markdown, results table, result choices update): the results only;
        the page's player follows in a second event (:meth:`player` of the chosen result),
        so that the results are shown as soon as they are ready."""
        import gradio as gr

        try:
            query = cap_query(query, limit=sys.maxsize)
        except ValueError:
            return self._empty("Type a query to search, or click one of the examples.")
        notes = []
        if len(query) > MAX_QUERY_CHARS:
            notes.append(
                f"⚠ The query has {len(query):,} characters: only its first "
                f"{MAX_QUERY_CHARS} were searched (queries are limited to {MAX_QUERY_CHARS} "
                "characters)."
            )
            query = query[:MAX_QUERY_CHARS].strip()
        guess = identify_language(query)
        if guess.lang is None and guess.script is None:
            nothing = (
                "⚠ Nothing to search for: the query has no letters (only emoji, "
                "punctuation, digits or symbols). Type words describing the video, or click "
                "an example."
            )
            return self._empty(" ".join([*notes, nothing]))
        try:
            if lang_choice == AUTO:
                if guess.lang is None or not self.reads(guess.lang):
                    return self._empty(" ".join([*notes, unread_message(guess)]))
                lang = guess.lang
            else:
                lang = check_language(lang_choice, "the query language")
            display_lang = check_language(display_lang, "the display language")
            target = check_language(target, "the translation target")
        except ValueError as error:
            raise user_error(str(error)) from None
        if self.engine is None:
            return self._empty(" ".join(notes + [self.slot.progress_markdown()]))
        how = detection_note(guess) if lang_choice == AUTO else "chosen"
        notes.insert(0, f"Query language: **{language_name(lang)}** ({how}).")
        failed = False
        if translate and target != lang:
            try:
                translated = self.translator(query, lang, target)
                notes.append(f"Translated to {NAMES[target]}: “{markdown_text(translated)}”.")
                query, lang = cap_query(translated), target
            except (TranslationUnavailable, ValueError) as error:
                notes.append(f"⚠ Translation unavailable: {markdown_text(error)}")
                failed = True
        coverage = self.engine.coverage(query, lang)
        warning = coverage_warning(coverage, lang, self.engine.train_langs,
                                   getattr(self.engine, "text_encoder", None),
                                   getattr(self.engine, "fitted_langs", ()), failed)
        if warning:
            notes.append(warning)
        if coverage.nothing_known:
            return self._empty(" ".join(notes))
        hits = self.engine.search(query, lang, int(k), display_lang)
        thumbnails = self._thumbnail_cells(hits)
        rows = [
            ([thumbnails[i]] if self.thumbnails else [])
            + [
                h.rank,
                h.video_id,
                h.caption,
                h.caption_lang or "",
                segment_text(h.start, h.end),
                round(h.score, 4),
                ", ".join(h.experts),
            ]
            for i, h in enumerate(hits)
        ]
        missing = sum(h.caption_lang != display_lang for h in hits)
        if missing:
            notes.append(
                f"{missing} video(s) have no {NAMES[display_lang]} caption; "
                "their closest caption is shown."
            )
        if hits:
            notes.append("Click a row to play its segment.")
        choices = [(f"{h.rank}. {h.video_id}", h.caption_id or h.video_id) for h in hits]
        first = choices[0][1] if choices else None
        return (
            " ".join(notes),
            pd.DataFrame(rows, columns=self.columns),
            gr.update(choices=choices, value=first),
        )

    @staticmethod
    def example_language(example: Example) -> str:
        """The query-language field an example sets: 'auto' when detection finds its
        language (the field is then right for the next typed query too), else the language."""
        return AUTO if query_language(example.query).lang == example.lang else example.lang

    def _thumbnail_cells(self, hits) -> list[str]:
        """The thumbnail cells of ``hits`` (those made within :data:`THUMBNAIL_BUDGET`
        seconds; placeholders for the rest)."""
        if self.thumbnails is None:
            return []
        return self.thumbnails.cells([(h.video_id, self.collection.media_path(h.video_id),
                                       h.start, h.end) for h in hits], THUMBNAIL_BUDGET)

    def thumbnail_markdown(self, video_id, start, end) -> str:
        """Markdown of the segment's thumbnail ('' without a decodable video file; a
        placeholder while the thumbnail pool makes it)."""
        if self.thumbnails is None:
            return ""
        path = self.collection.media_path(video_id)
        return self.thumbnails.cells([(video_id, path, start, end)])[0]

    async def fill_thumbnails(self, table):
        """The results table with its placeholders swapped for the thumbnails made within
        :data:`THUMBNAIL_WAIT` seconds (the search's follow-up event)."""
        import gradio as gr

        if self.thumbnails is None or table is None or THUMBNAIL_COLUMN not in table:
            return gr.skip()
        cells = await self.thumbnails.fill(list(table[THUMBNAIL_COLUMN]), THUMBNAIL_WAIT)
        if cells is None:
            return gr.skip()
        table = table.copy()
        table[THUMBNAIL_COLUMN] = cells
        return table

    def _then_fill(self, event, table):
        """``event`` followed by :meth:`fill_thumbnails` when the results have thumbnails."""
        if self.thumbnails is None:
            return event
        return event.then(self.fill_thumbnails, table, table, api_visibility="private",
                          concurrency_id="thumbnails", concurrency_limit=16)

    def play_row(self, row) -> tuple:
        """-> (result choice update, player html) for a clicked results row (its values)."""
        import gradio as gr

        row = list(row or [])[1:] if self.thumbnails else row
        if not row or len(row) < 4 or not row[1]:
            return gr.update(), gr.update()
        video_id, text, lang = str(row[1]), str(row[2]), str(row[3])
        captions = self.collection.captions
        rows = self.collection.caption_rows(video_id)
        chosen = [
            captions["caption_id"].iat[r]
            for r in rows
            if captions["lang"].iat[r] == lang and captions["text"].iat[r] == text
        ]
        key = chosen[0] if chosen else video_id
        return gr.update(value=key), self.player(key)

    def from_url(self, request=None):
        """The search the page's URL names (``?q=&lang=&display=&k=``): the fields, then
        the results of running it (nothing changes without ``q``)."""
        import gradio as gr

        params = dict(getattr(request, "query_params", None) or {})
        query = str(params.get("q", ""))[:FIELD_CHARS]
        if not query.strip():
            return (gr.update(),) * 7
        lang = params.get("lang", AUTO)
        lang = lang if lang in (AUTO, *SUPPORTED) else AUTO
        display = params.get("display", "en")
        display = display if display in SUPPORTED else "en"
        try:
            k = min(MAX_K, max(1, int(params.get("k", DEFAULT_K))))
        except ValueError:
            k = DEFAULT_K
        return (query, lang, display, k, *self.search(query, lang, display, k))

    def player(self, caption_or_video_id) -> str:
        """HTML: the video (from the media folder) at the caption's segment, and its captions
        (each a row that seeks the video to its segment when clicked)."""
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
        parts.append(video_html(collection, video_id, chosen))
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
                f"<tr{mark} data-start='{float(row['start']):.2f}' "
                f"data-end='{float(row['end']):.2f}' title='Play this segment'>"
                f"<td>{html_text(row['lang'])}</td>"
                f"<td>{html_text(segment_text(row['start'], row['end']))}</td>"
                f"<td lang='{html_text(row['lang'])}'>{html_text(row['text'])}</td></tr>"
            )
        parts.append("</table></div>")
        return "".join(parts)

    def build(self) -> None:
        """Lay out the tab's components inside the current ``gr.Blocks`` and wire events."""
        import gradio as gr

        languages = [(f"{NAMES[c]} ({c})", c) for c in SUPPORTED]
        placeholder = f"e.g. {self.examples[0].query}" if self.examples else "Describe a video"
        with gr.Row(elem_id="search-bar"):
            query = gr.Textbox(
                label="Query",
                placeholder=placeholder,
                max_length=FIELD_CHARS,
                lines=1,
                max_lines=3,
                scale=4,
                min_width=240,
                elem_id="search-query",
                submit_btn=False,
            )
            lang = gr.Dropdown(
                [("Detect from script", AUTO), *languages],
                value=AUTO,
                label="Query language",
                elem_id="search-lang",
                scale=1,
                min_width=140,
            )
            display = gr.Dropdown(
                languages, value="en", label="Show captions in", elem_id="search-display",
                scale=1, min_width=140,
            )
            button = gr.Button(
                "Search", variant="primary", scale=1, min_width=90, elem_id="search-button"
            )
        example_buttons = []
        with gr.Row(elem_id="search-examples"):
            gr.Markdown("Examples:", elem_classes=["rudder-examples-label"])
            for i, example in enumerate(self.examples):
                example_buttons.append(gr.Button(
                    example.label, size="sm", scale=0, min_width=60,
                    elem_id=f"search-example-{i}", elem_classes=["rudder-example"],
                ))
        with (
            gr.Accordion("More options: number of results, translation", open=False,
                         elem_id="search-more"),
            gr.Row(),
        ):
            k = gr.Slider(1, MAX_K, value=DEFAULT_K, step=1, label="Results (k)",
                          elem_id="search-k", min_width=150)
            translate = gr.Checkbox(
                label="Translate the query (Google Translate, needs the internet)",
                value=False,
                elem_id="search-translate",
            )
            target = gr.Dropdown(
                languages, value="en", label="Translate to", elem_id="search-target"
            )
        status = gr.Markdown(elem_id="search-status")
        with gr.Row(elem_id="search-main"):
            with gr.Column(scale=3, min_width=300):
                thumbnail_type: list[ColumnType] = ["markdown"] if self.thumbnails else []
                column_types: list[ColumnType] = [
                    "number", "str", "str", "str", "str", "number", "str"]
                widths: list[str | int] = ["56px", "70px", "34%", "48px", "96px", "72px", "120px"]
                if self.thumbnails:
                    widths.insert(0, "104px")
                table = gr.Dataframe(
                    headers=self.columns,
                    datatype=thumbnail_type + column_types,
                    column_widths=widths,
                    interactive=False,
                    wrap=True,
                    label="Ranked videos (click a row to play it)",
                    elem_id="search-results",
                )
            with gr.Column(scale=2, min_width=280, elem_id="search-side"):
                pick = gr.Dropdown(
                    choices=[], label="Playing", allow_custom_value=True,
                    elem_id="search-pick",
                )
                player = gr.HTML(elem_id="search-player", js_on_load=PLAYER_JS)

        inputs = [query, lang, display, k, translate, target]
        outputs = [status, table, pick]
        # the results first, in one light event; after it the player (of the chosen result),
        # outside the queue (building its HTML takes well under a millisecond), and the
        # thumbnails the pool has made since
        show_player = {"fn": self.player, "inputs": pick, "outputs": player,
                       "api_visibility": "private", "queue": False}

        def after_search(event):
            return self._then_fill(event.then(**show_player), table)

        after_search(button.click(self.search, inputs, outputs, api_name="search", js=URL_JS,
                                  **SEARCH_QUEUE))
        after_search(query.submit(self.search, inputs, outputs, api_name="search_submit",
                                  js=URL_JS, **SEARCH_QUEUE))
        # .input, not .change: a search, an example or the page's URL setting the display
        # language must not start a second search
        after_search(display.input(self.search, inputs, outputs,
                                   api_name="change_display_language", js=URL_JS,
                                   **SEARCH_QUEUE))
        pick.input(self.player, pick, player, api_name="play")

        def play_selected(evt):
            return self.play_row(evt.row_value)

        play_selected.__annotations__ = {"evt": gr.SelectData}
        table.select(play_selected, None, [pick, player], api_name="play_result").then(
            None, None, None, js=SHOW_PLAYER_JS, api_visibility="private"
        )
        for example, example_button in zip(self.examples, example_buttons, strict=False):
            after_search(example_button.click(
                lambda e=example: (e.query, self.example_language(e), e.display),
                None,
                [query, lang, display],
                api_visibility="private",
                queue=False,
            ).then(self.search, inputs, outputs, js=URL_JS, api_visibility="private",
                    **SEARCH_QUEUE))

        def open_url(request):
            return self.from_url(request)

        open_url.__annotations__ = {"request": gr.Request}
        self.load_event = (open_url, [query, lang, display, k, *outputs])
        self.after_load = after_search

