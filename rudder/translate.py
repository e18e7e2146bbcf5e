"""Machine translation with googletrans (4.x async API), an on-disk cache and a clear offline error.

The RUDDER authors made their Tamil and Telugu captions with Google Translate; this wrapper
does the same for any supported pair. :func:`translate_texts` looks every text up in a
SQLite cache first, sends the rest in batches (one client session, at most
``texts_per_second``), and commits each batch to the cache as soon as it returns, so an
interrupted run resumes where it stopped. Network failures raise
:class:`TranslationUnavailable` within ``timeout`` seconds; nothing but finished batches is
ever written.
"""

from __future__ import annotations

import asyncio
import sqlite3
import time
from pathlib import Path

from rudder.languages import check_language
from rudder.optional import require
from rudder.paths import cache_dir

DEFAULT_SERVICE = "translate.googleapis.com"


class TranslationUnavailable(RuntimeError):
    """Google Translate could not be reached or refused the request."""


def default_cache_path() -> Path:
    """``$RUDDER_CACHE/translations.sqlite`` (default ``~/.cache/rudder``)."""
    root = cache_dir()
    return root / "translations.sqlite"


class TranslationCache:
    """``(src, dest, text) -> translation`` in SQLite; each :meth:`put` is one transaction."""

    def __init__(self, path):
        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self.db = sqlite3.connect(self.path)
        self.db.execute(
            "CREATE TABLE IF NOT EXISTS translations (src TEXT, dest TEXT, text TEXT, "
            "translation TEXT, PRIMARY KEY (src, dest, text))"
        )
        self.db.commit()

    def get(self, src: str, dest: str, texts) -> dict[str, str]:
        found: dict[str, str] = {}
        texts = list(texts)
        for i in range(0, len(texts), 500):
            chunk = texts[i : i + 500]
            marks = ",".join("?" * len(chunk))
            rows = self.db.execute(
                "SELECT text, translation FROM translations "
                f"WHERE src=? AND dest=? AND text IN ({marks})",
                [src, dest, *chunk],
            )
            found.update(rows.fetchall())
        return found

    def put(self, src: str, dest: str, pairs) -> None:
        with self.db:
            self.db.executemany(
                "INSERT OR REPLACE INTO translations VALUES (?, ?, ?, ?)",
                [(src, dest, text, translation) for text, translation in pairs],
            )

    def close(self) -> None:
        self.db.close()


class GoogleBackend:
    """googletrans 4.x: ``async with Translator(timeout=...) as t: await t.translate(...)``."""

    def __init__(self, timeout: float = 10.0, service_url: str | None = None):
        self.timeout, self.service_url = timeout, service_url or DEFAULT_SERVICE

    async def __aenter__(self):
        Translator = require("googletrans", "translate").Translator
        import httpx

        # raise_exception=True: otherwise googletrans returns the source text on HTTP errors.
        self.client = Translator(
            service_urls=(self.service_url,),
            timeout=httpx.Timeout(self.timeout),
            raise_exception=True,
        )
        return self

    async def __aexit__(self, *exc):
        await self.client.__aexit__(*exc)

    async def translate(self, texts: list[str], src: str, dest: str) -> list[str]:
        import httpx

        try:
            results = await self.client.translate(texts, src=src, dest=dest)
        except httpx.HTTPError as error:
            raise TranslationUnavailable(
                f"cannot reach Google Translate at {self.service_url} "
                f"({type(error).__name__}: {error}); check the network connection and try again"
            ) from error
        except Exception as error:  # googletrans raises a bare Exception on a bad HTTP status
            raise TranslationUnavailable(
                f"Google Translate refused the request: {error}"
            ) from error
        return [r.text for r in results]


def translate_texts(
    texts,
    src: str,
    dest: str,
    *,
    cache_path=None,
    batch_size: int = 20,
    texts_per_second: float = 5.0,
    timeout: float = 10.0,
    backend=None,
    progress=None,
) -> dict[str, str]:
    """Translate the distinct ``texts`` from ``src`` to ``dest``: ``{text: translation}``.

    ``backend`` is an async context manager with ``translate(texts, src, dest)``
    (default :class:`GoogleBackend`). ``progress(done, total)`` is called after each batch.
    """
    check_language(src, "translation source")
    check_language(dest, "translation target")
    if batch_size < 1:
        raise ValueError(f"batch_size {batch_size}: use a positive number of texts per request")
    texts = list(dict.fromkeys(texts))
    cache = TranslationCache(cache_path or default_cache_path())
    try:
        result = cache.get(src, dest, texts)
        todo = [t for t in texts if t not in result]
        if todo:
            backend = backend or GoogleBackend(timeout)
            asyncio.run(
                _run(
                    todo,
                    src,
                    dest,
                    cache,
                    result,
                    backend,
                    batch_size,
                    texts_per_second,
                    progress,
                    len(texts),
                )
            )
        return result
    finally:
        cache.close()


async def _run(
    todo, src, dest, cache, result, backend, batch_size, texts_per_second, progress, total
):
    interval = batch_size / texts_per_second if texts_per_second > 0 else 0.0
    async with backend as client:
        for i in range(0, len(todo), batch_size):
            started = time.monotonic()
            batch = todo[i : i + batch_size]
            translated = await client.translate(batch, src, dest)
            if len(translated) != len(batch) or not all(
                isinstance(t, str) and t.strip() for t in translated
            ):
                raise TranslationUnavailable(
                    f"the translator returned an incomplete batch for {batch[:2]}..."
                )
            cache.put(src, dest, zip(batch, translated, strict=True))
            result.update(zip(batch, translated, strict=True))
            if progress:
                progress(len(result), total)
            wait = interval - (time.monotonic() - started)
            if wait > 0 and i + batch_size < len(todo):
                await _pause(wait)


async def _pause(seconds: float) -> None:
    """The rate limit's wait (one place, so tests can observe it without patching asyncio)."""
    await asyncio.sleep(seconds)
