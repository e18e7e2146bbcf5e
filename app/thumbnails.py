"""Thumbnails of video segments for the search results (``--media``), decoded with PyAV.

A thumbnail is the first frame at or after the middle of a segment (times count from the
file's start time, as in the build), turned upright by its rotation metadata, scaled to
``WIDTH`` pixels wide, saved as JPEG in a cache folder under a name that hashes the video
file (path, size, modification time) and the time, so a replaced file gets new thumbnails
and a restart reuses the old ones. A file PyAV cannot decode has no thumbnail (None).
"""

from __future__ import annotations

import hashlib
import logging
import threading
from pathlib import Path

from rudder.atomic import replacing
from rudder.paths import cache_dir

log = logging.getLogger(__name__)
WIDTH = 160


def default_thumbnail_dir() -> Path:
    """``$RUDDER_CACHE/thumbnails`` (default ``~/.cache/rudder/thumbnails``)."""
    return cache_dir("thumbnails")


def _origin(container) -> float:
    """The container's start time in seconds (0 when unset): segment times count from it,
    as in ``datasets_scripts.video_decode._origin``, which the build uses."""
    start = container.start_time
    return start / 1_000_000 if start is not None else 0.0


def _upright(frame):
    """``frame`` as a PIL image turned by its rotation metadata (counter-clockwise degrees
    of the display matrix, rounded to a quarter turn), as the build's frames are."""
    image = frame.to_image()
    turns = round((frame.rotation or 0) / 90) % 4
    return image.rotate(90 * turns, expand=True) if turns else image


def frame_at(path: Path, seconds: float):
    """The first decoded video frame of ``path`` at or after ``seconds`` from the file's
    start time (the last frame when the video is shorter) as an upright PIL image; None
    without a decodable video stream. It seeks first, and decodes from the start when the
    seek lands past ``seconds`` or yields no frame (as near the end of an MPEG-PS file)."""
    import av

    try:
        for seek in (True, False):
            with av.open(str(path)) as container:
                if not container.streams.video:
                    return None
                stream = container.streams.video[0]
                target = seconds + _origin(container)
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
                    return None if last is None else _upright(last)
    except (av.error.FFmpegError, OSError, ValueError) as error:
        log.warning("no thumbnail for %s at %.2f s: %s", path, seconds, error)
    return None


class Thumbnails:
    """Cached segment thumbnails of the video files of one media folder."""

    def __init__(self, folder=None, width: int = WIDTH):
        self.folder = Path(folder or default_thumbnail_dir()).resolve()
        self.width = width
        self._lock = threading.Lock()

    def path(self, video: Path, start: float | None, end: float | None) -> Path | None:
        """The thumbnail of ``video`` between ``start`` and ``end`` seconds (the first
        frame when they are unknown), made on first use; None when it cannot be decoded."""
        try:
            stat = video.stat()
        except OSError:
            return None
        middle = 0.0 if start is None or end is None else max(0.0, (start + end) / 2)
        key = (f"v2|{video.resolve()}|{stat.st_size}|{stat.st_mtime_ns}|{middle:.3f}|"
               f"{self.width}")  # v2: start time and rotation applied
        target = self.folder / f"{hashlib.sha1(key.encode()).hexdigest()[:20]}.jpg"
        if target.is_file():
            return target
        image = frame_at(video, middle)
        if image is None:
            return None
        height = max(1, round(image.height * self.width / max(1, image.width)))
        image = image.convert("RGB").resize((self.width, height))
        with self._lock, replacing(target) as tmp:
            image.save(tmp, format="JPEG", quality=80)
        return target
