"""HTML of the annotation tab: the query caption, a candidate, their videos' other captions.

Every caption text, id and language code goes through :func:`app.escaping.html_text`.
"""

from __future__ import annotations

import pandas as pd

from app.collection import Collection
from app.escaping import html_text
from app.search_tab import segment_text


def query_html(collection: Collection, query_id: str) -> str:
    row = collection.caption(query_id)
    return (
        f"<div class='rudder-query'><div class='rudder-label'>Query caption {html_text(query_id)} "
        f"({html_text(row['lang'])}, video {html_text(row['video_id'])}, "
        f"{html_text(segment_text(row['start'], row['end']))} s)</div>"
        f"<p class='rudder-text' lang='{html_text(row['lang'])}'>{html_text(row['text'])}</p>"
        f"{terms_html(row)}{other_captions_html(collection, row['video_id'], query_id)}</div>"
    )


def candidate_html(collection: Collection, candidate, position: int, total: int) -> str:
    """A candidate row of :meth:`CandidateRanker.rank` with its heuristic hints."""
    row = collection.caption(candidate["caption_id"])
    hints = []
    if candidate["heuristic"] is not None:
        hints.append(f"heuristic: {html_text(candidate['heuristic'])}")
    if not pd.isna(candidate["relevance"]):
        hints.append(f"R = {candidate['relevance']:.2f}")
    if not pd.isna(candidate["similarity"]):
        hints.append(f"text similarity = {candidate['similarity']:.2f}")
    return (
        f"<div class='rudder-candidate'><div class='rudder-label'>"
        f"Candidate {position + 1} of {total}: {html_text(row['caption_id'])} "
        f"({html_text(row['lang'])}, video {html_text(row['video_id'])}) — "
        f"{' · '.join(hints)}</div>"
        f"<p class='rudder-text' lang='{html_text(row['lang'])}'>{html_text(row['text'])}</p>"
        f"{terms_html(row)}{other_captions_html(collection, row['video_id'], row['caption_id'])}"
        "</div>"
    )


def terms_html(row: dict) -> str:
    """Nouns and verbs of a caption, when the dataset has them."""
    parts = []
    for column in ("nouns", "verbs"):
        values = row.get(column)
        if values is not None and len(values):
            parts.append(f"{column}: {html_text(', '.join(map(str, values)))}")
    return f"<div class='rudder-terms'>{' · '.join(parts)}</div>" if parts else ""


def other_captions_html(collection: Collection, video_id: str, except_id: str) -> str:
    rows = [collection.record(p) for p in collection.caption_rows(video_id)]
    rows = [r for r in rows if r["caption_id"] != except_id]
    if not rows:
        return ""
    items = "".join(
        f"<li><span class='rudder-lang'>{html_text(r['lang'])}</span> "
        f"<span lang='{html_text(r['lang'])}'>{html_text(r['text'])}</span></li>"
        for r in rows
    )
    return (
        "<details class='rudder-others' open>"
        f"<summary>Other captions of this video ({len(rows)})</summary><ul>{items}</ul></details>"
    )
