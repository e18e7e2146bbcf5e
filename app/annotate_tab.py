"""The annotation tab: label caption pairs positive / partial / description / negative.

The tab is stateless between calls: what to show next is recomputed from the SQLite store
(the first candidate, in heuristic order, that the annotator has not labelled), so two
annotators, a reload or a restarted server all continue where the store says.
"""

from __future__ import annotations

import random
import tempfile
import threading
from functools import lru_cache, partial

import pandas as pd

from app.annotate_html import candidate_html, query_html
from app.annotations_db import LABEL_NAMES, AnnotationError, AnnotationStore, check_annotator
from app.candidates import CandidateRanker
from app.collection import Collection
from app.escaping import markdown_text
from app.export import agreement, export, relation_records

LABELS = ("positive", "partial", "description", "negative")
SHORTCUTS = {"positive": "1", "partial": "2", "description": "3", "negative": "4"}
SAME, ANY, ALL = "same", "any", "(all datasets)"
HISTORY_COLUMNS = ["candidate", "text", "label", "time"]
AGREEMENT_COLUMNS = ["annotator_a", "annotator_b", "shared_pairs", "kappa"]


class AnnotateTab:
    """Handlers of the annotation tab over a store and named collections."""

    def __init__(
        self,
        store: AnnotationStore,
        collections: dict[str, Collection],
        limit: int = 20,
        alpha_n: float = 0.5,
        alpha_v: float = 0.5,
    ):
        self.store, self.collections, self.limit = store, collections, limit
        self.alpha_n, self.alpha_v = alpha_n, alpha_v
        self._rankers: dict[str, CandidateRanker] = {}
        self._lock = threading.Lock()
        # A query's candidate order depends only on the dataset: cache the recent ones.
        self._ranked = lru_cache(maxsize=512)(self._rank)

    # ----------------------------------------------------------- helpers
    def _collection(self, dataset: str) -> Collection:
        if dataset not in self.collections:
            raise _error(f"unknown dataset {dataset!r}; choose one of {sorted(self.collections)}")
        return self.collections[dataset]

    def _ranker(self, dataset: str) -> CandidateRanker:
        with self._lock:
            if dataset not in self._rankers:
                self._rankers[dataset] = CandidateRanker(
                    self._collection(dataset), self.alpha_n, self.alpha_v
                )
            return self._rankers[dataset]

    def candidates(self, dataset: str, query_id: str, cand_lang: str) -> pd.DataFrame:
        """The ranked candidates of a query (a cached table: do not modify it)."""
        collection = self._collection(dataset)
        try:
            query = collection.caption(query_id)
        except KeyError as error:
            raise _error(str(error.args[0])) from None
        lang = query["lang"] if cand_lang == SAME else None if cand_lang == ANY else cand_lang
        return self._ranked(dataset, query_id, lang)

    def _rank(self, dataset: str, query_id: str, lang: str | None) -> pd.DataFrame:
        return self._ranker(dataset).rank(query_id, lang, self.limit)

    def _annotator(self, annotator: str) -> str:
        try:
            return check_annotator(annotator)
        except AnnotationError as error:
            raise _error(str(error)) from None

    # ------------------------------------------------------------- views
    def view(
        self, annotator, dataset, query_id, cand_lang=SAME, after_id=None, show_id=None, note=""
    ):
        """-> (query html, query id, candidate html, candidate id, progress markdown, history).

        The candidate shown is ``show_id`` if given, else the first one the annotator has not
        labelled, searching from just after ``after_id`` (wrapping around).
        """
        if not query_id:
            return (
                "<p>Pick a query caption: next unlabelled, random, or find one.</p>",
                "",
                "",
                "",
                markdown_text(note),
                pd.DataFrame(columns=HISTORY_COLUMNS),
            )
        collection = self._collection(dataset)
        annotator = (annotator or "").strip()
        cands = self.candidates(dataset, query_id, cand_lang)
        done = self.store.labelled_candidates(dataset, annotator, query_id) if annotator else set()
        open_ = ~cands["caption_id"].isin(done).to_numpy()
        start = 0
        if after_id is not None and after_id in set(cands["caption_id"]):
            start = int(cands.index[cands["caption_id"] == after_id][0]) + 1
        order = list(range(start, len(cands))) + list(range(start))
        position = next((p for p in order if open_[p]), None)
        if show_id is not None and show_id in set(cands["caption_id"]):
            position = int(cands.index[cands["caption_id"] == show_id][0])
        if position is None:
            cand_html, cand_id = (
                (
                    f"<p>All {len(cands)} candidates of this query are labelled. "
                    "Press <b>Next unlabelled</b> for another query.</p>"
                ),
                "",
            )
        else:
            cand_id = cands["caption_id"].iat[position]
            cand_html = candidate_html(collection, cands.iloc[position], position, len(cands))
        labelled = len(cands) - int(open_.sum())
        progress = [
            f"Query {markdown_text(query_id)}: **{labelled} of {len(cands)}** candidates labelled"
        ]
        if annotator:
            counts = self.store.counts_by_query(dataset, annotator)
            progress.append(
                f"{markdown_text(annotator)} has labelled {sum(counts.values())} pairs over "
                f"{len(counts)} query captions of {len(collection.captions)} in "
                f"{markdown_text(dataset)}"
            )
        else:
            progress.append("enter your annotator name to label")
        progress.append(self._ranker(dataset).description)
        if note:
            progress.insert(0, f"**{markdown_text(note)}**")
        return (
            query_html(collection, query_id),
            query_id,
            cand_html,
            cand_id,
            " · ".join(progress),
            self._history(dataset, annotator, query_id),
        )

    def _history(self, dataset, annotator, query_id) -> pd.DataFrame:
        if not annotator:
            return pd.DataFrame(columns=HISTORY_COLUMNS)
        collection = self._collection(dataset)
        rows = self.store.current(dataset, annotator, query_id)
        texts = collection.captions["text"].to_numpy()
        position = collection.row_of.reindex([r["caption_id_b"] for r in rows]).to_numpy()
        return pd.DataFrame(
            [
                [
                    r["caption_id_b"],
                    texts[int(p)] if pd.notna(p) else "",
                    LABEL_NAMES[r["label"]],
                    r["time"],
                ]
                for r, p in zip(reversed(rows), position[::-1])
            ],
            columns=HISTORY_COLUMNS,
        )

    # ---------------------------------------------------------- handlers
    def next_unlabelled(self, annotator, dataset, cand_lang=SAME):
        """The first started-but-unfinished query of the annotator, else the first untouched one."""
        annotator = self._annotator(annotator)
        collection = self._collection(dataset)
        counts = self.store.counts_by_query(dataset, annotator)
        for query_id in counts:
            if query_id in collection.row_of.index and counts[query_id] < len(
                self.candidates(dataset, query_id, cand_lang)
            ):
                return self.view(annotator, dataset, query_id, cand_lang)
        untouched = collection.captions["caption_id"][
            ~collection.captions["caption_id"].isin(counts.keys())
        ]
        if untouched.empty:
            return self.view(
                annotator,
                dataset,
                "",
                cand_lang,
                note="Every caption of this dataset has labels from you.",
            )
        return self.view(annotator, dataset, untouched.iat[0], cand_lang)

    def random_query(self, annotator, dataset, cand_lang=SAME):
        collection = self._collection(dataset)
        return self.view(
            annotator, dataset, random.choice(collection.captions["caption_id"].tolist()), cand_lang
        )

    def open_query(self, annotator, dataset, query_id, cand_lang=SAME):
        return self.view(annotator, dataset, query_id, cand_lang)

    def find(self, dataset, text):
        """Captions whose id or text contains ``text`` (case-insensitive), at most 50."""
        import gradio as gr

        captions = self._collection(dataset).captions
        text = (text or "").strip().lower()[:200]
        hits = captions[
            captions["caption_id"].str.lower().str.contains(text, regex=False)
            | captions["text"].str.lower().str.contains(text, regex=False)
        ].head(50)
        choices = [
            (f"{c} ({lang}): {t[:80]}", c)
            for c, lang, t in zip(hits["caption_id"], hits["lang"], hits["text"])
        ]
        return gr.update(choices=choices, value=None)

    def label(self, label, annotator, dataset, query_id, candidate_id, cand_lang=SAME):
        """Store ``label`` for (query, candidate), then show the next candidate (or next query)."""
        annotator = self._annotator(annotator)
        collection = self._collection(dataset)
        for caption_id in (query_id, candidate_id):
            if caption_id not in collection.row_of.index:
                raise _error(
                    f"dataset {dataset!r} has no caption {caption_id!r}: "
                    "pick a query and a candidate first"
                )
        try:
            self.store.add(dataset, annotator, query_id, candidate_id, label)
        except AnnotationError as error:
            raise _error(str(error)) from None
        result = self.view(annotator, dataset, query_id, cand_lang, after_id=candidate_id)
        if result[3]:
            return result
        return self.next_unlabelled(annotator, dataset, cand_lang)

    def skip(self, annotator, dataset, query_id, candidate_id, cand_lang=SAME):
        return self.view(annotator, dataset, query_id, cand_lang, after_id=candidate_id)

    def undo(self, annotator, dataset, cand_lang=SAME):
        """Undo the annotator's newest label in ``dataset`` and show that pair again."""
        annotator = self._annotator(annotator)
        undone = self.store.undo(dataset, annotator)
        if undone is None:
            return self.view(annotator, dataset, "", cand_lang, note="Nothing to undo.")
        query_id, candidate_id = undone["caption_id_a"], undone["caption_id_b"]
        note = f"Undid {LABEL_NAMES[undone['label']]} for {query_id} / {candidate_id}"
        return self.view(annotator, dataset, query_id, cand_lang, show_id=candidate_id, note=note)

    def export(self, scope):
        """-> (relations.jsonl path, relations.csv path, agreement table, status)."""
        dataset = None if scope == ALL else scope
        out = tempfile.mkdtemp(prefix="rudder-relations-")
        jsonl, csv = export(self.store, out, dataset)
        records = relation_records(self.store, dataset)
        return str(jsonl), str(csv), self.agreement(scope), f"Exported {len(records)} labels."

    def agreement(self, scope) -> pd.DataFrame:
        records = relation_records(self.store, None if scope == ALL else scope)
        table = pd.DataFrame(agreement(records), columns=AGREEMENT_COLUMNS)
        table["kappa"] = table["kappa"].map(
            lambda k: "n/a" if k is None or pd.isna(k) else f"{k:.3f}"
        )
        return table

    # ------------------------------------------------------------ layout
    def build(self, demo) -> None:
        """Lay out the tab's components inside the current ``gr.Blocks`` and wire events."""
        import gradio as gr

        names = sorted(self.collections)
        lang_choices = [("same as the query", SAME), ("any", ANY)] + [
            (code, code)
            for code in sorted({lang for c in self.collections.values() for lang in c.languages})
        ]
        with gr.Row():
            annotator = gr.Textbox(label="Annotator", max_length=100, elem_id="ann-annotator")
            dataset = gr.Dropdown(names, value=names[0], label="Dataset", elem_id="ann-dataset")
            cand_lang = gr.Dropdown(
                lang_choices, value=SAME, label="Candidate language", elem_id="ann-cand-lang"
            )
        with gr.Row():
            next_button = gr.Button("Next unlabelled", variant="primary", elem_id="ann-next")
            random_button = gr.Button("Random", elem_id="ann-random")
            find_text = gr.Textbox(
                label="Find a caption (id or text)", max_length=200, elem_id="ann-find-text"
            )
            found = gr.Dropdown(
                choices=[], label="Matching captions", allow_custom_value=True, elem_id="ann-found"
            )
        query_html = gr.HTML(elem_id="ann-query")
        candidate_html = gr.HTML(elem_id="ann-candidate")
        with gr.Row():
            query_id = gr.Textbox(
                label="Query caption id", interactive=False, elem_id="ann-query-id"
            )
            candidate_id = gr.Textbox(
                label="Candidate caption id", interactive=False, elem_id="ann-candidate-id"
            )
        with gr.Row():
            buttons = {
                name: gr.Button(
                    f"{name.capitalize()} [{SHORTCUTS[name]}]",
                    elem_id=f"ann-{name}",
                    variant="primary" if name == "positive" else "secondary",
                )
                for name in LABELS
            }
            skip = gr.Button("Skip [s]", elem_id="ann-skip")
            undo = gr.Button("Undo [u]", variant="stop", elem_id="ann-undo")
        progress = gr.Markdown(elem_id="ann-progress")
        history = gr.Dataframe(
            headers=HISTORY_COLUMNS,
            interactive=False,
            wrap=True,
            label="Your labels for this query",
            elem_id="ann-history",
        )
        with gr.Accordion("Export and agreement", open=False):
            with gr.Row():
                scope = gr.Dropdown([ALL, *names], value=ALL, label="Export", elem_id="ann-scope")
                export_button = gr.Button("Export relations", elem_id="ann-export")
                agreement_button = gr.Button("Agreement (Cohen's kappa)", elem_id="ann-agreement")
            with gr.Row():
                jsonl_file = gr.File(label="relations.jsonl", elem_id="ann-jsonl")
                csv_file = gr.File(label="relations.csv", elem_id="ann-csv")
            export_status = gr.Markdown()
            kappa = gr.Dataframe(
                headers=AGREEMENT_COLUMNS,
                interactive=False,
                label="Agreement per annotator pair",
                elem_id="ann-kappa",
            )

        view = [query_html, query_id, candidate_html, candidate_id, progress, history]
        next_button.click(
            self.next_unlabelled, [annotator, dataset, cand_lang], view, api_name="next_unlabelled"
        )
        random_button.click(
            self.random_query, [annotator, dataset, cand_lang], view, api_name="random_query"
        )
        find_text.submit(self.find, [dataset, find_text], found, api_name="find_captions")
        found.input(
            self.open_query, [annotator, dataset, found, cand_lang], view, api_name="open_query"
        )
        cand_lang.input(
            self.open_query,
            [annotator, dataset, query_id, cand_lang],
            view,
            api_name="change_candidate_language",
        )
        pair = [annotator, dataset, query_id, candidate_id, cand_lang]
        for name, button in buttons.items():
            button.click(
                partial(self.label, name),
                pair,
                view,
                api_name=f"label_{name}",
                concurrency_limit=None,
            )
        skip.click(self.skip, pair, view, api_name="skip")
        undo.click(
            self.undo,
            [annotator, dataset, cand_lang],
            view,
            api_name="undo",
            concurrency_limit=None,
        )
        export_button.click(
            self.export, scope, [jsonl_file, csv_file, kappa, export_status], api_name="export"
        )
        agreement_button.click(self.agreement, scope, kappa, api_name="agreement")
        _logged_in_user.__annotations__["request"] = gr.Request  # so Gradio passes the request
        demo.load(_logged_in_user, None, annotator, api_name="whoami")


def _logged_in_user(request):
    """The ``--auth`` user name as the default annotator (unchanged without login)."""
    import gradio as gr

    name = getattr(request, "username", None)
    return name if name else gr.update()


def _error(message: str):
    import gradio as gr

    return gr.Error(message)
