"""Thumbnails of video segments for the search results (``--media``), decoded with PyAV.

A thumbnail is the first frame at or after the middle of a segment, scaled to
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


def frame_at(path: Path, seconds: float):
    """The first decoded video frame of ``path`` at or after ``seconds`` (the last frame
    when the video is shorter) as a PIL image; None without a decodable video stream."""
    import av

    try:
        with av.open(str(path)) as container:
            if not container.streams.video:
                return None
            stream = container.streams.video[0]
            if seconds > 0 and stream.time_base:
                container.seek(int(seconds / stream.time_base), stream=stream, backward=True)
            last = None
            for frame in container.decode(stream):
                last = frame
                if frame.time is None or frame.time >= seconds - 1e-6:
                    break
            return None if last is None else last.to_image()
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
        key = f"{video.resolve()}|{stat.st_size}|{stat.st_mtime_ns}|{middle:.3f}|{self.width}"
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
