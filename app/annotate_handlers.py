"""The annotation tab's handlers: label caption pairs positive / partial / description / negative.

The tab is stateless between calls: what to show next is recomputed from the SQLite store,
so two annotators, a reload or a restarted server all continue where the store says. In a
queue order (``model-disagreement``, ``heuristic``, ``random``: :mod:`app.pair_queue`) the
next pair is the queue's first that still needs a label from this annotator
(:meth:`AnnotationStore.claim_from_queue`); query by query, it is the first candidate, in
heuristic order, of the current query that the annotator has not labelled. A browser
tab (a Gradio session) *claims* the pair it shows (:meth:`AnnotationStore.claim`), so two
tabs of one annotator never show the same pair. With a login (``--auth``) the annotator is
the logged-in user, whatever the Annotator field says. The layout is in
:mod:`app.annotate_layout`, the HTML of the cards in :mod:`app.annotate_html`.
"""

from __future__ import annotations

import functools
import inspect
import itertools
import random
import tempfile
import threading
from dataclasses import dataclass, fields
from functools import lru_cache
from typing import Any

import numpy as np
import pandas as pd

from .annotate_html import candidate_html, other_captions_html, query_html
from .annotations_db import LABEL_NAMES, AnnotationError, AnnotationStore, check_annotator
from .candidates import CandidateRanker
from .collection import Collection
from .escaping import markdown_text, user_error
from .export import agreement, agreement_report, relation_records, write_agreement, write_records
from .pair_queue import STRATEGIES, QueueError
from .queue_service import QueueService

SAME, ANY, ALL = "same", "any", "(all datasets)"
QUERY = "query"  # the order "query by query"; the others are the queue strategies
ORDERS = (*STRATEGIES, QUERY)
HISTORY_COLUMNS = ["candidate", "text", "label", "time"]
AGREEMENT_COLUMNS = ["annotator_a", "annotator_b", "shared_pairs", "kappa"]
ANNOTATOR_COLUMNS = ["annotator", "labels", "shared_pairs", "agreement", "alpha_without"]
DISAGREEMENT_COLUMNS = ["dataset", "query", "candidate", "labels"]
NO_ANNOTATOR = "Enter your name in the Annotator field (top left) to label."


@dataclass(frozen=True)
class View:
    """What the tab shows after a handler: one field per output component, named as in
    :func:`app.annotate_layout.build_annotate_tab`, which builds its output list from this
    class too (:meth:`as_outputs` gives both the same order)."""

    query_html: Any  # the query card (HTML)
    query_id: Any  # the query caption id ('' without a query)
    candidate_html: Any  # the candidate card, or why none is shown (HTML)
    candidate_id: Any  # the candidate caption id ('' when none is shown)
    progress: Any  # counts, the annotator's totals and notes (markdown)
    history: Any  # the annotator's labels for this query (a table)
    others: Any  # the query video's other captions (HTML)

    def as_outputs(self) -> tuple:
        """The values in output order (the same objects, not copies): what a Gradio event
        function returns."""
        return tuple(getattr(self, field.name) for field in fields(self))


def session_of(request) -> str | None:
    """The Gradio session (one browser tab) of a request, None without one."""
    return getattr(request, "session_hash", None) or None


def logged_in_user(request) -> str | None:
    """The ``--auth`` user name of a request, None without a login."""
    return getattr(request, "username", None) or None


def normalise_name(name) -> str:
    """An annotator name as stored: spaces collapsed and stripped, case folded, so
    "Asha ", "asha" and "ASHA" are one annotator."""
    return " ".join(str(name or "").split()).casefold()


def for_annotator(handler):
    """A handler that acts for an annotator: its ``annotator`` argument becomes
    :meth:`AnnotateTab.annotator_of` (the logged-in user under ``--auth``, else the field,
    normalised) of it and its ``request``; without one, the handler does nothing and shows
    :meth:`AnnotateTab.name_missing`."""
    signature = inspect.signature(handler)

    @functools.wraps(handler)
    def checked(self, *args, **kwargs):
        bound = signature.bind(self, *args, **kwargs)
        bound.apply_defaults()
        annotator = self.annotator_of(bound.arguments["annotator"], bound.arguments["request"])
        if not annotator:
            return self.name_missing()
        bound.arguments["annotator"] = annotator
        return handler(*bound.args, **bound.kwargs)

    return checked


class AnnotateTab:
    """Handlers of the annotation tab over a store and named collections.

    Every handler the page calls takes the Gradio request last (``request``; None when
    called from Python): its user name replaces the Annotator field under ``--auth``, and
    its session hash names the tab that claims the pair it shows.
    """

    def __init__(
        self,
        store: AnnotationStore,
        collections: dict[str, Collection],
        limit: int = 20,
        alpha_n: float = 0.5,
        alpha_v: float = 0.5,
        queues: QueueService | None = None,
    ):
        self.store, self.collections, self.limit = store, collections, limit
        self.alpha_n, self.alpha_v = alpha_n, alpha_v
        self.queues = queues or QueueService(store, collections, lambda name: None,
                                             alpha_n=alpha_n, alpha_v=alpha_v, limit=limit)
        self._rankers: dict[str, CandidateRanker] = {}
        self._lock = threading.Lock()
        # A query's candidate order depends only on the dataset: cache the recent tables,
        # and every list of candidate ids (``limit`` ids a list, kept for the server's life).
        self._ranked = lru_cache(maxsize=512)(self._rank)
        self._candidate_ids: dict[tuple, frozenset] = {}
        self._exports: tempfile.TemporaryDirectory | None = None

    # ----------------------------------------------------------- helpers
    def _collection(self, dataset: str) -> Collection:
        if dataset not in self.collections:
            raise user_error(
                f"unknown dataset {dataset!r}; choose one of {sorted(self.collections)}"
            )
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
            raise user_error(str(error.args[0])) from None
        lang = query["lang"] if cand_lang == SAME else None if cand_lang == ANY else cand_lang
        return self._ranked(dataset, query_id, lang)

    def _rank(self, dataset: str, query_id: str, lang: str | None) -> pd.DataFrame:
        table = self._ranker(dataset).rank(query_id, lang, self.limit)
        self._candidate_ids[dataset, query_id, lang] = frozenset(table["caption_id"])
        return table

    def candidate_ids(self, dataset: str, query_id: str, lang: str | None) -> frozenset:
        """The ids of :meth:`candidates` for a query and a language (None: any)."""
        ids = self._candidate_ids.get((dataset, query_id, lang))
        if ids is None:
            ids = frozenset(self._ranked(dataset, query_id, lang)["caption_id"])
        return ids

    def _open_started(self, dataset: str, annotator: str, cand_lang):
        """The queries the annotator started whose candidate list in ``cand_lang`` mode still
        holds unlabelled captions, in dataset order (a generator), decided from the store.

        A list holds the first ``limit`` captions of other videos in the mode's language
        (any language in ``any`` mode) in one fixed order, so the captions of one language
        that any mode's list holds are a prefix of that language's list: in a one-language
        mode a query is done once it has ``min(limit, eligible captions)`` labels in that
        language. In ``any`` mode such a count may come from one-language lists, so those
        queries are checked against their (cached) list when reached.
        """
        collection = self._collection(dataset)
        captions = collection.captions
        pairs = pd.DataFrame(self.store.labelled_pairs(dataset, annotator), columns=["a", "b"])
        a = collection.row_of.reindex(pairs["a"]).to_numpy()
        b = collection.row_of.reindex(pairs["b"]).to_numpy()
        known = ~(np.isnan(a) | np.isnan(b))
        a, b = a[known].astype(np.int64), b[known].astype(np.int64)
        mode = _mode_languages(captions, cand_lang)
        in_mode = np.ones(len(a), dtype=bool)
        if mode is not None:
            in_mode = captions["lang"].to_numpy()[b] == mode[a]
        started = np.bincount(a, minlength=len(captions)) > 0
        count = np.bincount(a[in_mode], minlength=len(captions))
        open_ = started & (count < np.minimum(self.limit, _eligible(captions, mode)))
        ids = captions["caption_id"].to_numpy()
        order = np.argsort(a, kind="stable")
        a_sorted = a[order]
        for q in np.flatnonzero(open_ if mode is not None else started):
            if not open_[q]:  # any mode, as many labels as candidates: check the list
                first, stop = np.searchsorted(a_sorted, [q, q + 1])
                labelled = set(ids[b[order[first:stop]]])
                if self.candidate_ids(dataset, ids[q], None) <= labelled:
                    continue
            yield ids[q]

    @staticmethod
    def annotator_of(annotator, request=None) -> str:
        """The logged-in user if any, else the Annotator field, normalised
        (:func:`normalise_name`; '' when empty); a name the store refuses (too long) is an
        error."""
        name = normalise_name(logged_in_user(request) or annotator)
        try:
            return check_annotator(name) if name else ""
        except AnnotationError as error:
            raise user_error(str(error)) from None

    @staticmethod
    def name_missing() -> View:
        """The view of a handler called without an annotator: one message, nothing else."""
        import gradio as gr

        keep = gr.update()
        return View(keep, keep, keep, keep, f"**{NO_ANNOTATOR}**", keep, keep)

    # ------------------------------------------------------------- views
    def view(
        self,
        annotator,
        dataset,
        query_id,
        cand_lang=SAME,
        after_id=None,
        show_id=None,
        note="",
        session=None,
    ) -> View:
        """What the tab shows for a query (:class:`View`).

        The candidate shown is ``show_id`` if given, else the first one the annotator has not
        labelled, searching from just after ``after_id`` (wrapping around); with a
        ``session`` and an annotator, it is claimed for that session, skipping the ones
        other sessions of the annotator claim.
        """
        if not query_id:
            return View(
                query_html="<p>Pick a query caption: next unlabelled, random, or find one.</p>",
                query_id="",
                candidate_html="",
                candidate_id="",
                progress=markdown_text(note),
                history=pd.DataFrame(columns=HISTORY_COLUMNS),
                others="",
            )
        collection = self._collection(dataset)
        cands = self.candidates(dataset, query_id, cand_lang)
        ids = cands["caption_id"].tolist()
        done = self.store.labelled_candidates(dataset, annotator, query_id) if annotator else set()
        start = ids.index(after_id) + 1 if after_id in ids else 0
        order = ids[start:] + ids[:start]
        forced = show_id in ids
        if forced:
            order = [show_id]
        if annotator and session:
            cand_id = self.store.claim(session, dataset, annotator, query_id, order, forced)
        else:
            cand_id = next((c for c in order if forced or c not in done), None)
        labelled = sum(c in done for c in ids)
        if cand_id is None:
            others = len(ids) - labelled
            cand_html = (
                f"<p>The other {others} unlabelled candidates of this query are open in your "
                "other tabs. Press <b>Next unlabelled</b> for another query.</p>"
                if others
                else f"<p>All {len(ids)} candidates of this query are labelled. "
                "Press <b>Next unlabelled</b> for another query.</p>"
            )
        else:
            position = ids.index(cand_id)
            cand_html = candidate_html(collection, cands.iloc[position], position, len(ids))
        progress = [
            f"Query {markdown_text(query_id)}: **{labelled} of {len(ids)}** candidates labelled"
        ]
        if annotator:
            progress.append(self._annotator_line(dataset, annotator))
        else:
            progress.append(f"**{NO_ANNOTATOR}**")
        progress.append(self._ranker(dataset).description)
        if note:
            progress.insert(0, f"**{markdown_text(note)}**")
        return View(
            query_html=query_html(collection, query_id),
            query_id=query_id,
            candidate_html=cand_html,
            candidate_id=cand_id or "",
            progress=" · ".join(progress),
            history=self._history(dataset, annotator, query_id),
            others=other_captions_html(collection, query_id, cand_id),
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
                for r, p in zip(reversed(rows), position[::-1], strict=False)
            ],
            columns=HISTORY_COLUMNS,
        )

    # ---------------------------------------------------------- handlers
    @for_annotator
    def next_unlabelled(self, annotator, dataset, cand_lang=SAME, order=QUERY,
                        request=None) -> View:
        """In a queue order, the queue's next pair for the annotator (query by query, with a
        note, while the queue is being built). Query by query: the first started-but-
        unfinished query of the annotator, else the first untouched one; queries whose open
        candidates all show in the annotator's other tabs are passed."""
        if (order or QUERY) != QUERY:
            ready, note = self._queue_ready(dataset, order)
            if ready:
                return self.queue_view(annotator, dataset, order, cand_lang, session_of(request))
            return self._by_query(annotator, dataset, cand_lang, request, note=note)
        return self._by_query(annotator, dataset, cand_lang, request)

    def _queue_ready(self, dataset: str, order: str) -> tuple[bool, str]:
        """Whether the queue ``order`` of ``dataset`` can serve; else the note to show (the
        tab goes on query by query meanwhile)."""
        self._collection(dataset)
        if order not in STRATEGIES:
            raise user_error(f"unknown order {order!r}; choose one of {list(ORDERS)}")
        try:
            ready, why = self.queues.ensure(dataset, order)
        except QueueError as error:
            ready, why = False, str(error)
        return ready, ("" if ready else f"{why}. Meanwhile: query by query.")

    def _by_query(self, annotator, dataset, cand_lang, request, note="") -> View:
        collection = self._collection(dataset)
        counts = self.store.counts_by_query(dataset, annotator)
        untouched = (
            caption_id
            for caption_id in collection.captions["caption_id"]
            if caption_id not in counts
        )
        started = self._open_started(dataset, annotator, cand_lang)
        for query_id in itertools.chain(started, untouched):
            result = self.view(annotator, dataset, query_id, cand_lang, session=session_of(request),
                               note=note)
            if result.candidate_id:
                return result
        return self.view(
            annotator,
            dataset,
            "",
            cand_lang,
            note="Every caption of this dataset has labels "
            "from you (or is open in another of your tabs).",
        )

    def queue_view(self, annotator, dataset, strategy, cand_lang=SAME, session=None, after=-1,
                   note="") -> View:
        """The queue's next pair for the annotator after position ``after`` (claimed for the
        session), with why the queue put it there."""
        self._collection(dataset)
        lang_mode = (("same", None) if cand_lang == SAME else ("any", None) if cand_lang == ANY
                     else ("lang", cand_lang))
        row = self.store.claim_from_queue(session, dataset, annotator, strategy, after, lang_mode)
        info = self.store.queue_info(dataset, strategy) or {"size": 0, "built": "?"}
        built = str(info["built"]).replace("T", " ")[:16] + " UTC"
        done = self.store.queue_progress(dataset, strategy)
        progress = [
            (f"Queue {markdown_text(strategy)} (built {markdown_text(built)}): "
             f"**{done['labelled']:,} of {info['size']:,}** pairs labelled; "
             f"{done['double_done']:,} of {done['doubled']:,} double-labelled pairs have both "
             "labels"),
            self._annotator_line(dataset, annotator),
        ]
        if note:
            progress.insert(0, f"**{markdown_text(note)}**")
        if row is None:
            return View(
                query_html="<p>Nothing left for you in this queue in this candidate language: "
                "every pair is labelled by you, has all its labels, or is open in another tab. "
                "Choose another order or candidate language.</p>",
                query_id="",
                candidate_html="",
                candidate_id="",
                progress=" · ".join(progress),
                history=pd.DataFrame(columns=HISTORY_COLUMNS),
                others="",
            )
        heading = f"Queue {strategy}, pair {row['position'] + 1:,} of {info['size']:,}"
        return self.pair_view(annotator, dataset, row["caption_id_a"], row["caption_id_b"],
                              heading, queue_reasons(row), " · ".join(progress))

    def pair_view(self, annotator, dataset, query_id, cand_id, heading, notes=(),
                  progress="") -> View:
        """One given pair, with its heuristic hints and ``notes`` on the candidate card."""
        collection = self._collection(dataset)
        hints = self._ranker(dataset).pair(query_id, cand_id)
        return View(
            query_html=query_html(collection, query_id),
            query_id=query_id,
            candidate_html=candidate_html(collection, hints, 0, 1, heading, tuple(notes)),
            candidate_id=cand_id,
            progress=progress,
            history=self._history(dataset, annotator, query_id),
            others=other_captions_html(collection, query_id, cand_id),
        )

    def _annotator_line(self, dataset, annotator) -> str:
        counts = self.store.counts_by_query(dataset, annotator)
        return (f"{markdown_text(annotator)} has labelled {sum(counts.values())} pairs over "
                f"{len(counts)} query captions of {len(self._collection(dataset).captions)} in "
                f"{markdown_text(dataset)}")

    def random_query(self, annotator, dataset, cand_lang=SAME, order=QUERY, request=None) -> View:
        collection = self._collection(dataset)
        query_id = random.choice(collection.captions["caption_id"].tolist())
        return self.open_query(annotator, dataset, query_id, cand_lang, request=request)

    def open_query(self, annotator, dataset, query_id, cand_lang=SAME, request=None) -> View:
        annotator = self.annotator_of(annotator, request)
        return self.view(annotator, dataset, query_id, cand_lang, session=session_of(request))

    def change_language(self, annotator, dataset, query_id, cand_lang=SAME, order=QUERY,
                        request=None) -> View:
        """Another candidate language: the queue's next pair in it, or the query's list."""
        if (order or QUERY) != QUERY and self.annotator_of(annotator, request):
            return self.next_unlabelled(annotator, dataset, cand_lang, order, request=request)
        return self.open_query(annotator, dataset, query_id, cand_lang, request=request)

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
            for c, lang, t in zip(hits["caption_id"], hits["lang"], hits["text"], strict=True)
        ]
        return gr.update(choices=choices, value=None)

    @for_annotator
    def label(
        self, label, annotator, dataset, query_id, candidate_id, cand_lang=SAME, order=QUERY,
        request=None,
    ) -> View:
        """Store ``label`` for (query, candidate), then show the next pair: the queue's in a
        queue order (a pair the queue does not hold is kept too, and said so), else the
        query's next candidate (or the next query)."""
        collection = self._collection(dataset)
        for caption_id in (query_id, candidate_id):
            if caption_id not in collection.row_of.index:
                raise user_error(
                    f"dataset {dataset!r} has no caption {caption_id!r}: "
                    "pick a query and a candidate first"
                )
        session = session_of(request)
        try:
            self.store.add(dataset, annotator, query_id, candidate_id, label, session)
        except AnnotationError as error:
            raise user_error(str(error)) from None
        if (order or QUERY) != QUERY and self._queue_ready(dataset, order)[0]:
            row = self.store.queue_row(dataset, order, query_id, candidate_id)
            note = "" if row is not None else (
                f"{query_id} / {candidate_id} is not in the {order} queue (it was opened by "
                "hand): its label is kept like any other; the queue goes on")
            after = -1 if row is None else row["position"]
            return self.queue_view(annotator, dataset, order, cand_lang, session, after, note)
        result = self.view(
            annotator, dataset, query_id, cand_lang, after_id=candidate_id, session=session
        )
        if result.candidate_id:
            return result
        return self.next_unlabelled(annotator, dataset, cand_lang, QUERY, request=request)

    @for_annotator
    def skip(
        self, annotator, dataset, query_id, candidate_id, cand_lang=SAME, order=QUERY,
        request=None,
    ) -> View:
        """Show the next pair without labelling this one (the queue's next, or the query's)."""
        if (order or QUERY) != QUERY and self._queue_ready(dataset, order)[0]:
            row = self.store.queue_row(dataset, order, query_id, candidate_id)
            after = -1 if row is None else row["position"]
            return self.queue_view(annotator, dataset, order, cand_lang, session_of(request),
                                   after)
        return self.view(
            annotator,
            dataset,
            query_id,
            cand_lang,
            after_id=candidate_id,
            session=session_of(request),
        )

    @for_annotator
    def undo(self, annotator, dataset, cand_lang=SAME, order=QUERY, request=None) -> View:
        """Undo the annotator's newest label in ``dataset`` and show that pair again (from
        the candidate list of its language when the current mode's list lacks it)."""
        undone = self.store.undo(dataset, annotator, session_of(request))
        if undone is None:
            return self.view(
                annotator, dataset, "", cand_lang, note="Nothing to undo in this tab."
            )
        query_id, candidate_id = undone["caption_id_a"], undone["caption_id_b"]
        note = f"Undid {LABEL_NAMES[undone['label']]} for {query_id} / {candidate_id}"
        shown = self.candidates(dataset, query_id, cand_lang)["caption_id"]
        if not shown.eq(candidate_id).any() and candidate_id in self._collection(dataset).row_of:
            # labelled in another language mode: the list of its own language holds it
            cand_lang = self._collection(dataset).caption(candidate_id)["lang"]
        return self.view(
            annotator,
            dataset,
            query_id,
            cand_lang,
            show_id=candidate_id,
            note=note,
            session=session_of(request),
        )

    def export(self, scope):
        """-> (relations.jsonl path, relations.csv path, agreement.json path, agreement
        table, status).

        The files go to one temporary folder of the app (removed with it), replaced
        atomically by each export; the count and kappa are of the records written."""
        records = relation_records(self.store, None if scope == ALL else scope)
        jsonl, csv = write_records(records, self._export_dir())
        report = write_agreement(records, self._export_dir())
        return (str(jsonl), str(csv), str(report), agreement_table(records),
                f"Exported {len(records)} labels and their agreement report.")

    def _export_dir(self) -> str:
        with self._lock:
            if self._exports is None:
                self._exports = tempfile.TemporaryDirectory(prefix="rudder-relations-")
            return self._exports.name

    def agreement(self, scope):
        """-> (kappa per annotator pair, summary, per-annotator table, disagreeing pairs,
        the choices of the "open a disagreeing pair" list) of ``scope``
        (:func:`app.export.agreement_report`)."""
        import gradio as gr

        records = relation_records(self.store, None if scope == ALL else scope)
        report = agreement_report(records)
        alpha = report["alpha"]
        summary = (
            f"**{report['annotators']} annotators, {report['labels']:,} labels of "
            f"{report['pairs']:,} pairs; {report['shared_pairs']:,} pairs labelled by two or "
            f"more.** Krippendorff's alpha: ordinal (negative < partial < positive) "
            f"{_number(alpha['ordinal'])}, nominal (four labels) {_number(alpha['nominal'])}. "
            f"{len(report['disagreements']):,} pairs with disagreeing labels."
        )
        per_annotator = pd.DataFrame(report["per_annotator"], columns=ANNOTATOR_COLUMNS)
        for column in ("agreement", "alpha_without"):
            per_annotator[column] = per_annotator[column].map(_number)
        disagreements = pd.DataFrame(
            [[d["dataset"], d["caption_id_a"], d["caption_id_b"],
              ", ".join(f"{who}: {label}" for who, label in d["labels"].items())]
             for d in report["disagreements"]],
            columns=DISAGREEMENT_COLUMNS,
        )
        choices = [(f"{d['caption_id_a']} / {d['caption_id_b']} ({d['dataset']})",
                    "\t".join((d["dataset"], d["caption_id_a"], d["caption_id_b"])))
                   for d in report["disagreements"][:500]]
        return (agreement_table(records), summary, per_annotator, disagreements,
                gr.update(choices=choices, value=None))

    @for_annotator
    def open_pair(self, annotator, dataset, choice, request=None) -> View:
        """Show a pair from the list of disagreeing pairs (``dataset\tquery\tcandidate``), to
        label it: a third opinion, or an adjudicator's decision."""
        parts = str(choice or "").split("\t")
        if len(parts) != 3:
            raise user_error("choose a pair from the list of disagreeing pairs")
        pair_dataset, query_id, cand_id = parts
        if pair_dataset != dataset:
            raise user_error(f"that pair is in {pair_dataset}; choose it in the Dataset field "
                             "first")
        collection = self._collection(dataset)
        for caption_id in (query_id, cand_id):
            if caption_id not in collection.row_of.index:
                raise user_error(f"dataset {dataset!r} has no caption {caption_id!r}")
        given = {r["annotator"]: LABEL_NAMES[r["label"]]
                 for r in self.store.current(dataset, caption_id_a=query_id)
                 if r["caption_id_b"] == cand_id}
        note = "disagreement: " + ", ".join(f"{who} {given[who]}" for who in sorted(given))
        return self.pair_view(annotator, dataset, query_id, cand_id, "Disagreeing pair", (note,),
                              f"Your label of {markdown_text(query_id)} / "
                              f"{markdown_text(cand_id)} counts as one more vote (or settles "
                              "it, when you adjudicate).")

    def whoami(self, remembered="", request=None):
        """The Annotator field when the page loads: under ``--auth`` the logged-in user,
        read-only; else the name this browser remembered (``remembered``)."""
        import gradio as gr

        name = logged_in_user(request)
        if not name:
            return gr.update(value=normalise_name(remembered))
        return gr.update(
            value=normalise_name(name), interactive=False, label="Annotator (logged in)"
        )

    @staticmethod
    def remember(annotator):
        """-> (the field, the browser's remembered name): both the normalised name."""
        name = normalise_name(annotator)[:100]
        return name, name


def _mode_languages(captions: pd.DataFrame, cand_lang):
    """Per caption as a query, the language of its candidates in ``cand_lang`` mode (an
    object array); None in ``any`` mode."""
    if cand_lang == ANY:
        return None
    if cand_lang == SAME:
        return captions["lang"].to_numpy()
    return np.full(len(captions), cand_lang, dtype=object)


def _eligible(captions: pd.DataFrame, mode) -> np.ndarray:
    """Per caption as a query, how many captions of other videos (in the ``mode`` language
    of :func:`_mode_languages`, any language for None) can be its candidates."""
    if mode is None:
        return len(captions) - captions.groupby("video_id")["lang"].transform("size").to_numpy()
    per_video = captions.groupby(["video_id", "lang"]).size()
    own = per_video.reindex(pd.MultiIndex.from_arrays([captions["video_id"], mode]))
    in_lang = captions["lang"].value_counts().reindex(mode)
    return (in_lang.fillna(0).to_numpy() - own.fillna(0).to_numpy()).astype(np.int64)


def agreement_table(records: list[dict]) -> pd.DataFrame:
    """The agreement rows of ``records`` (:func:`app.export.agreement`), kappa as text."""
    table = pd.DataFrame(agreement(records), columns=AGREEMENT_COLUMNS)
    table["kappa"] = table["kappa"].map(lambda k: "n/a" if k is None or pd.isna(k) else f"{k:.3f}")
    return table


def queue_reasons(row: dict) -> tuple[str, ...]:
    """Why a queue row is there, and whether it is a second opinion (plain text)."""
    notes = []
    if row.get("model_rank"):
        notes.append(f"the model ranks the candidate's video {row['model_rank']:,}")
    if row.get("value") is not None:
        notes.append(f"value {row['value']:.2f}")
    if row["copies"] > 1:
        notes.append("second opinion: another annotator labelled this pair (label hidden)"
                     if row["labels"] else "shown to two annotators (agreement)")
    return tuple(notes)


def _number(value) -> str:
    """A report number for a table or a sentence ('n/a' when undefined)."""
    return "n/a" if value is None or pd.isna(value) else f"{value:.3f}"
