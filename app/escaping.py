"""Make data safe to show: HTML and Markdown escaping, query length caps.

Captions and queries come from datasets and users; anything rendered as HTML or Markdown
goes through :func:`html_text` or :func:`markdown_text` first, so ``<script>`` shows as text.
Error toasts render their message as (sanitised) HTML, so every error the app raises is
built by :func:`user_error`, which escapes it: an ``<img>`` or a link typed by a user shows
as text and loads nothing.
"""

from __future__ import annotations

import html
import re
import unicodedata

from rudder.optional import require

MAX_QUERY_CHARS = 300
# Markdown punctuation; "<", ">" and "&" are left to html.escape.
_MARKDOWN_SPECIAL = re.compile(r"([\\`*_{}\[\]()#+\-.!|~])")


def html_text(value) -> str:
    """``value`` as text for HTML element content or a quoted attribute."""
    return html.escape("" if value is None else str(value), quote=True)


def markdown_text(value) -> str:
    """``value`` as literal Markdown text: HTML-escaped, Markdown punctuation backslashed."""
    text = "" if value is None else str(value).replace("\n", " ")
    return html.escape(_MARKDOWN_SPECIAL.sub(r"\\\1", text), quote=False)


def user_error(message):
    """A ``gr.Error`` whose toast shows ``message`` literally (``<``, ``>``, ``&`` escaped;
    the toast puts it in element content, where quotes are harmless)."""
    gr = require("gradio", "app")

    return gr.Error(html.escape(str(message), quote=False))


def cap_query(text, limit: int = MAX_QUERY_CHARS) -> str:
    """A query without control characters (newlines become spaces; the zero-width joiners
    Indic scripts use are kept), stripped, at most ``limit`` characters.

    Raises ``ValueError`` for an empty query.
    """
    text = re.sub(r"\s+", " ", str(text or ""))
    text = "".join(ch for ch in text if unicodedata.category(ch) != "Cc").strip()
    if not text:
        raise ValueError("type a query first")
    return text[:limit]
