"""The annotation tab's layout and keyboard shortcuts (handlers: :mod:`app.annotate_handlers`).

Top to bottom: who and what to label, how to pick a query, the query and candidate side by
side, the label buttons with their keyboard shortcuts listed, progress, then the videos'
other captions, the history and export. The buttons come before the long caption lists
so they are in view without scrolling.
"""

from __future__ import annotations

import inspect
import json
from functools import partial

from rudder.labels import PairLabel
from rudder.optional import require

from .annotate_handlers import (
    AGREEMENT_COLUMNS,
    ALL,
    ANNOTATOR_COLUMNS,
    ANY,
    DISAGREEMENT_COLUMNS,
    HISTORY_COLUMNS,
    QUERY,
    SAME,
    AnnotateTab,
    View,
    logged_in_user,
)

# The Order field: the three queues (app.pair_queue), then today's query-by-query flow.
ORDER_CHOICES = [
    ("queue: model-disagreement", "model-disagreement"),
    ("queue: heuristic", "heuristic"),
    ("queue: random", "random"),
    ("query by query", QUERY),
]

# The label buttons, left to right.
LABELS = tuple(
    label.text
    for label in (PairLabel.POSITIVE, PairLabel.PARTIAL, PairLabel.DESCRIPTION, PairLabel.NEGATIVE)
)
# One line per label, shown beside the buttons (rudder.labels.PairLabel; the pair labels of
# docs/architecture.md).
DEFINITIONS = {
    "positive": "all of the query's objects and actions",
    "partial": "some of its objects or actions, not all",
    "description": "continues or applies it (next step, a use)",
    "negative": "none of its objects or actions",
}
# Button element id -> its keys (the first one is shown on the button).
SHORTCUTS = {
    "ann-positive": ("1", "p"),
    "ann-partial": ("2", "a"),
    "ann-description": ("3", "d"),
    "ann-negative": ("4", "n"),
    "ann-skip": ("s",),
    "ann-undo": ("u",),
}
# Keys typed into text fields are left alone and buttons are only pressed while visible
# (the annotation tab is open).
KEYBOARD_JS = """
if (!window.__rudderKeys) {
  window.__rudderKeys = true;
  const map = KEYMAP;
  document.addEventListener("keydown", (event) => {
    if (event.ctrlKey || event.metaKey || event.altKey || event.repeat) return;
    const target = event.target;
    const typing = ["INPUT", "TEXTAREA", "SELECT"].includes(target && target.tagName);
    if (typing || (target && target.isContentEditable)) return;
    const id = map[(event.key || "").toLowerCase()];
    const button = id && document.getElementById(id);
    if (!button || button.offsetParent === null) return;
    event.preventDefault();
    button.click();
  });
}
""".replace(
    "KEYMAP", json.dumps({key: elem_id for elem_id, keys in SHORTCUTS.items() for key in keys})
)


def definitions_html() -> str:
    """The four labels' one-line definitions as a definition list."""
    items = "".join(
        f"<dt>{name.capitalize()} [{SHORTCUTS[f'ann-{name}'][0]}]</dt><dd>{text}</dd>"
        for name, text in DEFINITIONS.items()
    )
    return f"<dl>{items}</dl>"


def shortcuts_markdown() -> str:
    """The keyboard shortcuts as one line of Markdown."""
    parts = [
        f"{' or '.join(f'`{key.upper()}`' for key in keys)} {elem_id[len('ann-') :]}"
        for elem_id, keys in SHORTCUTS.items()
    ]
    return "**Keys** (outside text fields): " + " · ".join(parts)


def with_request(handler):
    """``handler`` as a Gradio event function that also receives the ``gr.Request`` (its
    last parameter, ``request``)."""
    gr = require("gradio", "app")

    def event(*args):
        return handler(*args)

    # inspect.signature reads __signature__ on any callable (PEP 362); typeshed's
    # FunctionType does not declare it.
    event.__signature__ = inspect.signature(handler)  # type: ignore[attr-defined]
    event.__annotations__ = {"request": gr.Request}
    return event


def view_event(handler):
    """``handler``, which returns a :class:`app.annotate_handlers.View`, as a Gradio event
    function with the request (:func:`with_request`) returning the view's values in output
    order: the one place a view becomes the tuple Gradio needs."""

    def shown(*args):
        return handler(*args).as_outputs()

    # inspect.signature reads __signature__ on any callable (PEP 362); typeshed's
    # FunctionType does not declare it.
    shown.__signature__ = inspect.signature(handler)  # type: ignore[attr-defined]
    return with_request(shown)


def remembered_name():
    """The browser's remembered annotator name (a ``gr.BrowserState``). It must be made
    outside the tabs: a tab's components are mounted when it is first opened, and a state
    not yet mounted reads as empty when the page loads."""
    gr = require("gradio", "app")

    # The name is no secret: a fixed key lets the browser keep it across server restarts.
    return gr.BrowserState("", storage_key="rudder-annotator", secret="rudder-annotator")


def build_annotate_tab(tab: AnnotateTab, demo, remembered, retrainer=None, header=None) -> None:
    """Lay out the tab's components inside the current ``gr.Blocks`` and wire events
    (``remembered``: :func:`remembered_name`). With a :class:`app.retrain.Retrainer`, the
    tab can retrain the model and switch the app to the new run; ``header`` is then the
    page header and the function that says what it shows, refreshed after a switch."""
    gr = require("gradio", "app")

    names = sorted(tab.collections)
    lang_choices = [("same as the query", SAME), ("any", ANY)] + [
        (code, code)
        for code in sorted({lang for c in tab.collections.values() for lang in c.languages})
    ]
    with gr.Row():
        annotator = gr.Textbox(
            label="Annotator", max_length=100, elem_id="ann-annotator", min_width=140
        )
        dataset = gr.Dropdown(
            names, value=names[0], label="Dataset", elem_id="ann-dataset", min_width=140
        )
        cand_lang = gr.Dropdown(
            lang_choices, value=SAME, label="Candidate language", elem_id="ann-cand-lang",
            min_width=140,
        )
        order = gr.Dropdown(
            ORDER_CHOICES, value="model-disagreement", label="Order", elem_id="ann-order",
            min_width=180,
        )
        next_button = gr.Button(
            "Next unlabelled", variant="primary", elem_id="ann-next", min_width=140
        )
        random_button = gr.Button("Random", elem_id="ann-random", min_width=100)
    with gr.Row(elem_id="ann-cards"):
        query_html = gr.HTML(elem_id="ann-query", min_width=300)
        candidate_html = gr.HTML(elem_id="ann-candidate", min_width=300)
    with gr.Column(elem_id="ann-bar"):
        gr.HTML(definitions_html(), elem_id="ann-definitions")
        with gr.Row(elem_id="ann-buttons"):
            buttons = {
                name: gr.Button(
                    f"{name.capitalize()} [{SHORTCUTS[f'ann-{name}'][0]}]",
                    elem_id=f"ann-{name}",
                    variant="primary" if name == "positive" else "secondary",
                    min_width=70,
                )
                for name in LABELS
            }
            skip = gr.Button("Skip [s]", elem_id="ann-skip", min_width=70)
            undo = gr.Button("Undo [u]", variant="stop", elem_id="ann-undo", min_width=70)
    gr.Markdown(shortcuts_markdown(), elem_id="ann-keys")
    progress = gr.Markdown(elem_id="ann-progress")
    others = gr.HTML(elem_id="ann-others")
    with gr.Row():
        query_id = gr.Textbox(label="Query caption id", interactive=False, elem_id="ann-query-id")
        candidate_id = gr.Textbox(
            label="Candidate caption id", interactive=False, elem_id="ann-candidate-id"
        )
        find_text = gr.Textbox(
            label="Find a query caption (id or text)", max_length=200, elem_id="ann-find-text"
        )
        found = gr.Dropdown(
            choices=[], label="Matching captions", allow_custom_value=True, elem_id="ann-found"
        )
    history = gr.Dataframe(
        headers=HISTORY_COLUMNS,
        interactive=False,
        wrap=True,
        label="Your labels for this query",
        elem_id="ann-history",
    )
    with gr.Accordion("Export and agreement", open=False, elem_id="ann-agreement-panel"):
        with gr.Row():
            scope = gr.Dropdown([ALL, *names], value=ALL, label="Export", elem_id="ann-scope")
            export_button = gr.Button("Export relations", elem_id="ann-export")
            agreement_button = gr.Button(
                "Agreement (kappa, Krippendorff's alpha)", elem_id="ann-agreement"
            )
        with gr.Row():
            jsonl_file = gr.File(label="relations.jsonl", elem_id="ann-jsonl")
            csv_file = gr.File(label="relations.csv", elem_id="ann-csv")
            report_file = gr.File(label="agreement.json", elem_id="ann-report")
        export_status = gr.Markdown()
        summary = gr.Markdown(elem_id="ann-agreement-summary")
        kappa = gr.Dataframe(
            headers=AGREEMENT_COLUMNS,
            interactive=False,
            label="Cohen's kappa per annotator pair",
            elem_id="ann-kappa",
        )
        per_annotator = gr.Dataframe(
            headers=ANNOTATOR_COLUMNS,
            interactive=False,
            label="Per annotator: agreement with the others on shared pairs, and the ordinal "
            "alpha without them",
            elem_id="ann-annotators",
        )
        disagreements = gr.Dataframe(
            headers=DISAGREEMENT_COLUMNS,
            interactive=False,
            wrap=True,
            label="Pairs the annotators disagree on",
            elem_id="ann-disagreements",
        )
        disagreement_pick = gr.Dropdown(
            choices=[], label="Open a disagreeing pair (to add your label or adjudicate)",
            elem_id="ann-disagreement-pick",
        )
    if retrainer is not None:
        with gr.Accordion("Retrain the model on the settled labels", open=False,
                          elem_id="ann-retrain-panel"):
            retrain_status = gr.Markdown(elem_id="ann-retrain-status")
            with gr.Row():
                retrain_button = gr.Button(
                    "Retrain PO(M) on the settled labels", elem_id="ann-retrain"
                )
                switch_button = gr.Button(
                    "Switch search and queue to the retrained run", visible=False,
                    variant="primary", elem_id="ann-switch",
                )
            retrain_timer = gr.Timer(2.0, active=False)
    gr.HTML("", elem_id="ann-spacer")  # room for the label bar fixed at the window's bottom

    view = list(View(
        query_html=query_html,
        query_id=query_id,
        candidate_html=candidate_html,
        candidate_id=candidate_id,
        progress=progress,
        history=history,
        others=others,
    ).as_outputs())
    picking = [annotator, dataset, cand_lang, order]
    next_button.click(view_event(tab.next_unlabelled), picking, view, api_name="next_unlabelled")
    random_button.click(view_event(tab.random_query), picking, view, api_name="random_query")
    find_text.submit(tab.find, [dataset, find_text], found, api_name="find_captions")
    found.input(
        view_event(tab.open_query),
        [annotator, dataset, found, cand_lang],
        view,
        api_name="open_query",
    )
    cand_lang.input(
        view_event(tab.change_language),
        [annotator, dataset, query_id, cand_lang, order],
        view,
        api_name="change_candidate_language",
    )
    pair = [annotator, dataset, query_id, candidate_id, cand_lang, order]
    for name, button in buttons.items():
        button.click(
            view_event(partial(tab.label, name)),
            pair,
            view,
            api_name=f"label_{name}",
            concurrency_limit=None,
        )
    skip.click(view_event(tab.skip), pair, view, api_name="skip")
    undo.click(view_event(tab.undo), picking, view, api_name="undo", concurrency_limit=None)
    export_button.click(
        tab.export, scope, [jsonl_file, csv_file, report_file, kappa, export_status],
        api_name="export",
    )
    agreement_button.click(
        tab.agreement, scope, [kappa, summary, per_annotator, disagreements, disagreement_pick],
        api_name="agreement",
    )
    disagreement_pick.input(
        view_event(tab.open_pair), [annotator, dataset, disagreement_pick], view,
        api_name="open_disagreement",
    )
    if retrainer is not None:
        wire_retrain(retrainer, demo, retrain_status, retrain_button, switch_button,
                     retrain_timer, header)
    for event in (annotator.blur, annotator.submit):
        event(
            tab.remember, annotator, [annotator, remembered], queue=False,
            api_visibility="private",
        )
    demo.load(with_request(tab.whoami), remembered, annotator, api_name="whoami")


def wire_retrain(retrainer, demo, status, start, switch, timer, header=None) -> None:
    """The retrain panel's events: start (logged-in users with the permission), follow it
    every 2 s while it runs, switch the app to the finished run (and refresh ``header``)."""
    gr = require("gradio", "app")

    def shown():
        """(status, switch button, timer) as they are now."""
        running = retrainer.running
        return (retrainer.status(), gr.update(visible=retrainer.finished is not None),
                gr.Timer(active=running))

    def begin(request=None):
        message = retrainer.start(logged_in_user(request))
        return message, *shown()[1:]

    def change(request=None):
        message = retrainer.switch(logged_in_user(request))
        button = gr.update(visible=retrainer.finished is not None)
        return (message, button) if header is None else (message, button, header[1]())

    begin.__annotations__ = {"request": gr.Request}
    change.__annotations__ = {"request": gr.Request}
    start.click(begin, None, [status, switch, timer], api_name="retrain")
    timer.tick(shown, None, [status, switch, timer], api_visibility="private")
    outputs = [status, switch] + ([header[0]] if header is not None else [])
    switch.click(change, None, outputs, api_name="switch_run")
    demo.load(shown, None, [status, switch, timer], api_visibility="private")
