"""HTML of the annotation tab: the query caption, a candidate, their videos' other captions.

The query and candidate cards are short (caption, terms, hints) so the label buttons below
them stay in view; the videos' other captions come in a separate block under the buttons.

Every caption text, id and language code goes through :func:`app.escaping.html_text`.
"""

from __future__ import annotations

import pandas as pd

from .collection import Collection
from .escaping import html_text
from .search_tab import segment_text, video_html


def segment_video_html(collection: Collection, row: dict) -> str:
    """The caption's segment of its video, when the app has a media folder ('' without)."""
    if collection.media_dir is None:
        return ""
    return (
        f"<div class='rudder-segment'>{video_html(collection, row['video_id'], row, 160)}</div>"
    )


def query_html(collection: Collection, query_id: str) -> str:
    row = collection.caption(query_id)
    return (
        f"<div class='rudder-query'><div class='rudder-label'>Query caption {html_text(query_id)} "
        f"({html_text(row['lang'])}, video {html_text(row['video_id'])}, "
        f"{html_text(segment_text(row['start'], row['end']))} s)</div>"
        f"<p class='rudder-text' lang='{html_text(row['lang'])}'>{html_text(row['text'])}</p>"
        f"{terms_html(row)}{segment_video_html(collection, row)}</div>"
    )


def candidate_html(collection: Collection, candidate, position: int, total: int,
                   heading: str | None = None, notes: tuple[str, ...] = ()) -> str:
    """A candidate row of :meth:`CandidateRanker.rank` (or :meth:`CandidateRanker.pair`) with
    its heuristic hints; ``heading`` replaces "Candidate N of M" and ``notes`` (plain text)
    are added to the hints."""
    row = collection.caption(candidate["caption_id"])
    hints = []
    if candidate["heuristic"] is not None:
        hints.append(f"heuristic: {html_text(candidate['heuristic'])}")
    if not pd.isna(candidate["relevance"]):
        hints.append(f"R = {candidate['relevance']:.2f}")
    if not pd.isna(candidate["similarity"]):
        hints.append(f"text similarity = {candidate['similarity']:.2f}")
    hints.extend(html_text(note) for note in notes)
    heading = heading or f"Candidate {position + 1} of {total}"
    return (
        f"<div class='rudder-candidate'><div class='rudder-label'>"
        f"{html_text(heading)}: {html_text(row['caption_id'])} "
        f"({html_text(row['lang'])}, video {html_text(row['video_id'])}) — "
        f"{' · '.join(hints)}</div>"
        f"<p class='rudder-text' lang='{html_text(row['lang'])}'>{html_text(row['text'])}</p>"
        f"{terms_html(row)}{segment_video_html(collection, row)}</div>"
    )


def terms_html(row: dict) -> str:
    """Nouns and verbs of a caption, when the dataset has them."""
    parts = []
    for column in ("nouns", "verbs"):
        values = row.get(column)
        if values is not None and len(values):
            parts.append(f"{column}: {html_text(', '.join(map(str, values)))}")
    return f"<div class='rudder-terms'>{' · '.join(parts)}</div>" if parts else ""


def other_captions_html(collection: Collection, query_id: str, candidate_id: str | None) -> str:
    """The other captions of the query's and the candidate's videos, side by side."""
    blocks = []
    for role, caption_id in (("query", query_id), ("candidate", candidate_id)):
        if not caption_id:
            continue
        video_id = collection.caption(caption_id)["video_id"]
        rows = [collection.record(p) for p in collection.caption_rows(video_id)]
        items = "".join(
            f"<li><span class='rudder-lang'>{html_text(r['lang'])}</span> "
            f"<span lang='{html_text(r['lang'])}'>{html_text(r['text'])}</span></li>"
            for r in rows
            if r["caption_id"] != caption_id
        )
        blocks.append(
            f"<details class='rudder-others' open><summary>Other captions of the {role}'s "
            f"video {html_text(video_id)} ({len(rows) - 1})</summary><ul>{items}</ul></details>"
        )
    return f"<div class='rudder-others-row'>{''.join(blocks)}</div>" if blocks else ""
