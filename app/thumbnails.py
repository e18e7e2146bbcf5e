"""Thumbnails of video segments for the search results (``--media``), decoded with PyAV.

A thumbnail is the first frame at or after the middle of a segment (times count from the
file's start time, as in the build), turned upright by its rotation metadata, scaled to
``WIDTH`` pixels wide as it is converted, saved as JPEG in a cache folder under a name that
hashes the video file (path, size, modification time) and the time, so a replaced file gets
new thumbnails and a restart reuses the old ones. A file PyAV cannot decode, or whose frames
have more than ``max_pixels`` pixels (:data:`rudder.media.MAX_PIXELS`, 4K UHD, refused from
the stream's header before any frame is decoded), has no thumbnail (None); the failure is
remembered until the file changes.

Thumbnails are made in a pool of ``workers`` threads (default :data:`WORKERS`), so a slow
file never holds up a search: :meth:`Thumbnails.request` answers at once with the
thumbnail, or with a job key while the pool makes it (the search shows a placeholder and a
follow-up event, :meth:`Thumbnails.wait`, puts the thumbnail in when it is ready). Memory is
bounded by the pool: one frame per worker, of at most ``max_pixels`` pixels.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import functools
import hashlib
import logging
import re
import threading
from collections import OrderedDict
from concurrent.futures import Future, ThreadPoolExecutor
from pathlib import Path
from urllib.parse import quote

from rudder.atomic import replacing
from rudder.media import MAX_PIXELS, open_video, origin
from rudder.paths import cache_dir

from .escaping import markdown_text

log = logging.getLogger(__name__)
WIDTH = 160
WORKERS = 2
REMEMBERED_FAILURES = 10_000
PLACEHOLDER = "placeholder.jpg"
PENDING = re.compile(r"^!\[preparing the thumbnail of (.*) · ([0-9a-f]{20})\]")


def default_thumbnail_dir() -> Path:
    """``$RUDDER_CACHE/thumbnails`` (default ``~/.cache/rudder/thumbnails``)."""
    return cache_dir("thumbnails")


def _upright(frame, width: int | None = None):
    """``frame`` as a PIL image turned by its rotation metadata (counter-clockwise degrees
    of the display matrix, rounded to a quarter turn), as the build's frames are; scaled
    as it is converted to ``width`` pixels wide once upright (None: full size)."""
    turns = round((frame.rotation or 0) / 90) % 4
    if width is None:
        image = frame.to_image()
    else:
        shown = frame.height if turns % 2 else frame.width  # the upright image's width
        scale = width / max(1, shown)
        image = frame.to_image(width=max(1, round(frame.width * scale)),
                               height=max(1, round(frame.height * scale)))
    return image.rotate(90 * turns, expand=True) if turns else image


def frame_at(path: Path, seconds: float, width: int | None = None,
             max_pixels: int = MAX_PIXELS):
    """The first decoded video frame of ``path`` at or after ``seconds`` from the file's
    start time (the last frame when the video is shorter) as an upright PIL image, ``width``
    pixels wide (None: full size); None without a decodable video stream or with frames over
    ``max_pixels``. It seeks first, and decodes from the start when the seek lands past
    ``seconds`` or yields no frame (as near the end of an MPEG-PS file)."""
    import av

    try:
        for seek in (True, False):
            with open_video(path, max_pixels) as container:
                if not container.streams.video:
                    return None
                stream = container.streams.video[0]
                target = seconds + origin(container)
                seek = seek and target > 0 and bool(stream.time_base)
                if seek:
                    container.seek(int(target / stream.time_base), stream=stream,
                                   backward=True)
                first, last = None, None
                for frame in container.decode(stream):
                    first, last = first or frame, frame
                    if frame.time is None or frame.time >= target - 1e-6:
                        break
                overshot = first is not None and first.time is not None and (
                    first.time > target + 1e-6)
                if not seek or (last is not None and not overshot):
                    return None if last is None else _upright(last, width)
    except (av.error.FFmpegError, OSError, ValueError) as error:  # FrameSizeError too
        log.warning("no thumbnail for %s at %.2f s: %s", path, seconds, error)
    return None


class Thumbnails:
    """Cached segment thumbnails of the video files of one media folder."""

    def __init__(self, folder=None, width: int = WIDTH, workers: int = WORKERS,
                 max_pixels: int = MAX_PIXELS):
        self.folder = Path(folder or default_thumbnail_dir()).resolve()
        self.width = width
        self.max_pixels = max_pixels
        self._pool = ThreadPoolExecutor(workers, thread_name_prefix="rudder-thumbnail")
        self._lock = threading.Lock()
        self._jobs: dict[str, Future] = {}  # key -> the job making it
        self._failed: OrderedDict[str, None] = OrderedDict()  # keys without a thumbnail

    def _key(self, video: Path, start, end) -> tuple[str, float] | None:
        try:
            stat = video.stat()
        except OSError:
            return None
        middle = 0.0 if start is None or end is None else max(0.0, (start + end) / 2)
        text = (f"v2|{video.resolve()}|{stat.st_size}|{stat.st_mtime_ns}|{middle:.3f}|"
                f"{self.width}")  # v2: start time and rotation applied
        return hashlib.sha1(text.encode()).hexdigest()[:20], middle

    def file(self, key: str) -> Path:
        """Where the thumbnail of ``key`` is (or will be) saved."""
        return self.folder / f"{key}.jpg"

    def request(self, video: Path, start: float | None, end: float | None) -> Path | str | None:
        """The thumbnail of ``video`` between ``start`` and ``end`` seconds (the first frame
        when they are unknown) when it is made; else its key while the pool makes it; None
        when the file is missing or has no thumbnail. Never waits for a decoder."""
        found = self._key(video, start, end)
        if found is None:
            return None
        key, middle = found
        state = self.state(key)
        if state != "unknown":
            return state
        with self._lock:
            job = None
            if key not in self._jobs:
                job = self._pool.submit(self._make, key, video, middle)
                self._jobs[key] = job
        if job is not None:  # outside the lock: a job already done runs _finish right here
            job.add_done_callback(functools.partial(self._finish, key))
        return self.state(key)

    def state(self, key: str) -> Path | str | None:
        """``key``'s thumbnail, None when it has none, ``key`` while it is being made, or
        ``"unknown"`` when nothing was asked for it since the start."""
        target = self.file(key)
        if target.is_file():
            return target
        with self._lock:
            if key in self._failed:
                return None
            if key in self._jobs:
                return key
        return "unknown"

    async def wait(self, keys, timeout: float) -> None:
        """Wait (without holding a thread) until the jobs of ``keys`` are done, at most
        ``timeout`` seconds."""
        with self._lock:
            jobs = [self._jobs[k] for k in set(keys) if k in self._jobs]
        if jobs:
            await asyncio.wait([asyncio.wrap_future(j) for j in jobs], timeout=timeout)

    def settle(self, keys, timeout: float) -> None:
        """Wait up to ``timeout`` seconds for the jobs of ``keys`` (a search gives the
        quick ones this long, so they come with its results)."""
        with self._lock:
            jobs = [self._jobs[k] for k in set(keys) if k in self._jobs]
        if jobs:
            concurrent.futures.wait(jobs, timeout)

    def path(self, video: Path, start: float | None, end: float | None,
             timeout: float | None = None) -> Path | None:
        """:meth:`request`, waiting for the pool up to ``timeout`` seconds (None: as long
        as it takes); None when there is no thumbnail (yet)."""
        answer = self.request(video, start, end)
        if isinstance(answer, str):
            with self._lock:
                job = self._jobs.get(answer)
            if job is not None:
                try:
                    job.exception(timeout)  # waits; a failed job leaves no file
                except (concurrent.futures.TimeoutError, concurrent.futures.CancelledError):
                    return None
            answer = self.state(answer)
        return answer if isinstance(answer, Path) else None

    def cells(self, items, budget: float = 0.0) -> list[str]:
        """Markdown cells of ``items`` (``(video_id, file or None, start, end)``): the
        thumbnail, '' for none, or a placeholder naming the job; the jobs start at once, and
        those done within ``budget`` seconds come as thumbnails."""
        answers = [None if path is None else self.request(path, start, end)
                   for _, path, start, end in items]
        pending = [a for a in answers if isinstance(a, str)]
        if pending and budget > 0:
            self.settle(pending, budget)
            answers = [self.state(a) if isinstance(a, str) else a for a in answers]
        return [self._cell(video_id, answer)
                for (video_id, *_), answer in zip(items, answers, strict=True)]

    async def fill(self, cells, timeout: float) -> list[str] | None:
        """``cells`` with their placeholders swapped for the thumbnails made since, after
        waiting for them up to ``timeout`` seconds (without holding a thread); None when
        none was pending. A placeholder stays for a thumbnail not made by then."""
        pending = {i: m for i, c in enumerate(cells) if (m := PENDING.match(str(c)))}
        if not pending:
            return None
        await self.wait([m.group(2) for m in pending.values()], timeout)
        cells = list(cells)
        for i, match in pending.items():
            state = self.state(match.group(2))
            if state != match.group(2):  # made, or failed
                cells[i] = self._cell(match.group(1), state, escaped=True)
        return cells

    def _cell(self, video_id: str, answer, escaped: bool = False) -> str:
        name = video_id if escaped else markdown_text(video_id)
        if isinstance(answer, Path):
            return f"![segment of {name}](gradio_api/file={quote(str(answer), safe='/')})"
        if isinstance(answer, str) and answer != "unknown":
            src = quote(str(self.placeholder()), safe="/")
            return f"![preparing the thumbnail of {name} · {answer}](gradio_api/file={src})"
        return ""

    def placeholder(self) -> Path:
        """A grey image shown while a thumbnail is made (written once)."""
        target = self.folder / PLACEHOLDER
        if not target.is_file():
            from PIL import Image

            with replacing(target) as tmp:
                Image.new("RGB", (self.width, self.width * 9 // 16), (200, 200, 200)).save(
                    tmp, format="JPEG", quality=80)
        return target

    def _make(self, key: str, video: Path, middle: float) -> Path | None:
        target = self.file(key)
        if target.is_file():
            return target
        image = frame_at(video, middle, self.width, self.max_pixels)
        if image is None:
            return None
        with replacing(target) as tmp:
            image.convert("RGB").save(tmp, format="JPEG", quality=80)
        return target

    def _finish(self, key: str, job: Future) -> None:
        error = None if job.cancelled() else job.exception()
        if error is not None:
            log.warning("no thumbnail %s: %s", key, error)
        with self._lock:
            self._jobs.pop(key, None)
            if job.cancelled() or error is not None or job.result() is None:
                self._failed[key] = None
                while len(self._failed) > REMEMBERED_FAILURES:
                    self._failed.popitem(last=False)

    def close(self) -> None:
        """Stop the pool (jobs not started are dropped)."""
        self._pool.shutdown(wait=False, cancel_futures=True)
