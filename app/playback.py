"""Playing media files in the browser: the file itself when browsers play it, else a
browser-playable copy made once with PyAV.

Played as they are: ``.mp4``/``.m4v`` files holding H.264 (8-bit 4:2:0) or AV1 video and
AAC or MP3 audio (or none), and ``.webm`` files holding VP8, VP9 or AV1 video and Opus or
Vorbis audio: what Chrome, Firefox and Safari all play. Everything else (AVI, MPEG-TS,
MPEG-PS, Matroska, QuickTime, Ogg, FLV; MJPEG, HEVC, MPEG-2, MPEG-4 Part 2, 10-bit or 4:4:4
H.264, ...) is copied to H.264 + AAC in MP4 (:func:`transcode`): libx264 ``veryfast`` CRF
23, 4:2:0, scaled down to fit 1280x720, every frame at its time from the container's start
(so caption times play the same moment), the display rotation kept, AAC 128 kb/s at most
stereo, the index at the front (``+faststart``) so the browser can seek at once.

Copies go to ``$RUDDER_CACHE/playback/<hash>.mp4`` (the hash names the file's path, size
and modification time, so a replaced file gets a new copy), written atomically by one
background thread, one file at a time, in the order asked for; the folder is kept under
``max_bytes`` (default :data:`MAX_CACHE_BYTES`) by removing the copies played longest ago.
Files whose frames have more pixels than ``max_pixels`` (4K UHD) are neither played nor
copied. While a copy is made the player shows a note and the page retries loading it
(:data:`PLAYBACK_JS`). :func:`register_media_types` gives every video suffix its MIME type
(Python's table sends ``.ts`` as ``text/vnd.trolltech.linguist``).
"""

from __future__ import annotations

import concurrent.futures
import functools
import hashlib
import logging
import mimetypes
import os
import threading
from collections import OrderedDict
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass
from fractions import Fraction
from pathlib import Path
from typing import Any
from urllib.parse import quote

from rudder.atomic import replacing
from rudder.media import MAX_PIXELS, FrameSizeError, open_video, origin
from rudder.paths import cache_dir

from .escaping import html_text

log = logging.getLogger(__name__)
MAX_CACHE_BYTES = 4 << 30
MAX_SIZE = (1280, 720)
PLAYABLE = {  # suffix -> (container name part, video codecs, audio codecs) browsers play
    ".mp4": ("mp4", {"h264", "av1"}, {"aac", "mp3"}),
    ".m4v": ("mp4", {"h264", "av1"}, {"aac", "mp3"}),
    ".webm": ("webm", {"vp8", "vp9", "av1"}, {"opus", "vorbis"}),
}
BROWSER_PIXEL_FORMATS = {"yuv420p", "yuvj420p"}  # H.264 as browsers decode it
MEDIA_TYPES = {
    ".mp4": "video/mp4", ".m4v": "video/mp4", ".webm": "video/webm", ".mkv": "video/x-matroska",
    ".mov": "video/quicktime", ".avi": "video/x-msvideo", ".ts": "video/mp2t",
    ".m2ts": "video/mp2t", ".mts": "video/mp2t", ".mpg": "video/mpeg", ".mpeg": "video/mpeg",
    ".ogv": "video/ogg", ".flv": "video/x-flv", ".3gp": "video/3gpp", ".wmv": "video/x-ms-wmv",
    ".jpg": "image/jpeg",
}
# Retries loading a player whose copy is still being made, and hides its note once it loads.
PLAYBACK_JS = """
const retry = (video) => {
  const tries = Number(video.dataset.tries || "0");
  if (tries >= 180) return;
  video.dataset.tries = String(tries + 1);
  setTimeout(() => { if (video.isConnected) video.load(); }, Math.min(500 + 250 * tries, 5000));
};
document.addEventListener("error", (event) => {
  const video = event.target;
  if (video.tagName === "VIDEO" && video.dataset.pending) retry(video);
}, true);
document.addEventListener("loadedmetadata", (event) => {
  const video = event.target;
  if (video.tagName !== "VIDEO" || !video.dataset.pending) return;
  delete video.dataset.pending;
  const note = video.parentElement && video.parentElement.querySelector(".rudder-preparing");
  if (note) note.remove();
}, true);
"""


def register_media_types() -> None:
    """Give every video suffix (and ``.jpg``) its MIME type in :mod:`mimetypes`, which the
    server reads (call it after ``mimetypes.init()``, which Gradio runs on import)."""
    for suffix, media_type in MEDIA_TYPES.items():
        mimetypes.add_type(media_type, suffix)


@dataclass(frozen=True)
class Source:
    """What the player loads for a media file: ``path`` (the file or its copy; None when
    it cannot be played), whether it is ``ready``, and ``note`` (why a copy, or why not)."""

    path: Path | None
    ready: bool
    note: str = ""


def browser_problem(path: Path, max_pixels: int = MAX_PIXELS) -> str:
    """'' when browsers play ``path`` as it is, else what they cannot play ("MPEG-TS with
    H.264 video", ...). :class:`rudder.media.FrameSizeError` for frames over
    ``max_pixels``; PyAV's error for a file it cannot read."""
    with open_video(path, max_pixels) as container:
        if not container.streams.video:
            raise ValueError("no video stream")
        video = container.streams.video[0].codec_context
        audio = container.streams.audio[0].codec_context.name if container.streams.audio else None
        fmt = container.format.name
        playable = PLAYABLE.get(path.suffix.lower())
        pix_fmt = video.pix_fmt or ""
        if (playable and playable[0] in fmt and video.name in playable[1]
                and audio in playable[2] | {None}
                and (video.name != "h264" or pix_fmt in BROWSER_PIXEL_FORMATS)):
            return ""
        what = f"{container.format.long_name or fmt} with {video.name} video"
        return what + (f" and {audio} audio" if audio else "") + (
            f" ({pix_fmt})" if video.name == "h264" and pix_fmt not in BROWSER_PIXEL_FORMATS
            else "")


def _fit(width: int, height: int, box=MAX_SIZE) -> tuple[int, int]:
    """``width x height`` scaled down (never up) so that its long side fits ``box[0]`` and
    its short side ``box[1]`` (landscape or portrait), both even."""
    scale = min(1.0, box[0] / max(width, height, 1), box[1] / max(1, min(width, height)))
    return max(2, round(width * scale / 2) * 2), max(2, round(height * scale / 2) * 2)


def transcode(source: Path, target: Path, max_pixels: int = MAX_PIXELS) -> None:
    """Copy ``source`` to ``target`` as H.264 + AAC in MP4 (module docstring)."""
    import av

    with (open_video(source, max_pixels) as inp, replacing(target) as tmp,
          av.open(str(tmp), "w", format="mp4", options={"movflags": "+faststart"}) as out):
        _copy_streams(inp, out, av)


def _copy_streams(inp, out, av) -> None:
    vin = inp.streams.video[0]
    vin.thread_type = "AUTO"
    ain = inp.streams.audio[0] if inp.streams.audio else None
    width, height = _fit(vin.codec_context.width, vin.codec_context.height)
    rate = vin.average_rate or vin.guessed_rate or Fraction(25)
    vout = out.add_stream("libx264", rate=rate)
    vout.width, vout.height, vout.pix_fmt = width, height, "yuv420p"
    vout.time_base = vout.codec_context.time_base = Fraction(1, 1000)
    vout.options = {"preset": "veryfast", "crf": "23"}
    audio = _audio_output(ain, out, av) if ain is not None else None
    start = origin(inp)
    last_pts, samples, rotation = -1, None, None
    streams = [vin] + ([ain] if ain is not None else [])
    for frame in inp.decode(*streams):
        if frame.time is None:
            continue
        if isinstance(frame, av.VideoFrame):
            if rotation is None:
                rotation = int(frame.rotation or 0)
                if rotation:
                    vout.set_display_rotation(rotation)
            pts = max(last_pts + 1, round((frame.time - start) * 1000))
            picture = frame.reformat(width=width, height=height, format="yuv420p")
            picture.pts, picture.time_base, last_pts = pts, Fraction(1, 1000), pts
            out.mux(vout.encode(picture))
        elif audio is not None:
            aout, resampler = audio
            for piece in resampler.resample(frame):
                if samples is None:  # the first sample's time; then one after another
                    samples = max(0, round((frame.time - start) * aout.rate))
                piece.pts, piece.time_base = samples, Fraction(1, aout.rate)
                samples += piece.samples
                out.mux(aout.encode(piece))
    out.mux(vout.encode(None))
    if audio is not None:
        aout, resampler = audio
        for piece in resampler.resample(None):
            piece.pts, piece.time_base = samples or 0, Fraction(1, aout.rate)
            samples = (samples or 0) + piece.samples
            out.mux(aout.encode(piece))
        out.mux(aout.encode(None))


def _audio_output(ain, out, av) -> tuple[Any, Any]:
    """The AAC stream added to ``out`` for the input audio ``ain`` and the resampler that
    feeds it (stereo at most, at a sample rate AAC takes)."""
    channels = min(2, ain.codec_context.channels or 1)
    sample_rate = ain.codec_context.sample_rate or 48000
    if sample_rate not in (96000, 88200, 64000, 48000, 44100, 32000, 24000, 22050, 16000,
                           12000, 11025, 8000):
        sample_rate = 48000
    aout = out.add_stream("aac", rate=sample_rate)
    aout.layout = "stereo" if channels == 2 else "mono"
    aout.bit_rate = 128_000
    resampler = av.AudioResampler(format="fltp", layout=aout.layout.name, rate=sample_rate)
    return aout, resampler


class Playback:
    """The sources the players load for one app's media files (module docstring)."""

    def __init__(self, folder=None, max_pixels: int = MAX_PIXELS,
                 max_bytes: int = MAX_CACHE_BYTES):
        self.folder = Path(folder or cache_dir("playback")).resolve()
        self.max_pixels = max_pixels
        self.max_bytes = max_bytes
        self._pool = ThreadPoolExecutor(1, thread_name_prefix="rudder-playback")
        self._lock = threading.Lock()
        self._problems: OrderedDict[str, str | Exception] = OrderedDict()  # key -> verdict
        self._jobs: dict[str, Future] = {}
        self._failed: dict[str, str] = {}

    def _key(self, media: Path) -> str | None:
        try:
            stat = media.stat()
        except OSError:
            return None
        text = f"v1|{media.resolve()}|{stat.st_size}|{stat.st_mtime_ns}"
        return hashlib.sha1(text.encode()).hexdigest()[:20]

    def _problem(self, key: str, media: Path) -> str | Exception:
        """What browsers cannot play in ``media`` ('' nothing), or why it cannot be read."""
        with self._lock:
            if key in self._problems:
                return self._problems[key]
        try:
            verdict: str | Exception = browser_problem(media, self.max_pixels)
        except Exception as error:  # noqa: BLE001 - FrameSizeError, FFmpeg's, unreadable
            verdict = error
        with self._lock:
            self._problems[key] = verdict
            while len(self._problems) > 10_000:
                self._problems.popitem(last=False)
        return verdict

    def source(self, media: Path) -> Source:
        """The player's source for ``media``; starts its copy when one is needed."""
        key = self._key(media)
        if key is None:
            return Source(None, False, "the file cannot be read")
        problem = self._problem(key, media)
        if isinstance(problem, FrameSizeError):
            return Source(None, False, str(problem))
        if isinstance(problem, Exception):
            return Source(None, False, f"not a readable video ({problem})")
        if not problem:
            return Source(media, True)
        note = f"{problem}: a browser-playable copy (H.264 and AAC in MP4)"
        copy = self.folder / f"{key}.mp4"
        with self._lock:
            if key in self._failed:
                return Source(None, False, f"{problem}; making a browser-playable copy "
                              f"failed ({self._failed[key]})")
            if copy.is_file():
                _touch(copy)
                return Source(copy, True, note)
            if key not in self._jobs:
                job = self._pool.submit(self._copy, media, copy)
                self._jobs[key] = job
                job.add_done_callback(functools.partial(self._finish, key))
        return Source(copy, False, note)

    def wait(self, media: Path, timeout: float | None = None) -> Source:
        """:meth:`source`, after waiting up to ``timeout`` seconds for its copy."""
        self.source(media)  # starts the copy
        key = self._key(media)
        with self._lock:
            job = self._jobs.get(key) if key else None
        if job is not None:
            concurrent.futures.wait([job], timeout)  # on a timeout the source is not ready
        return self.source(media)

    def _copy(self, media: Path, copy: Path) -> None:
        transcode(media, copy, self.max_pixels)
        self._keep_under_limit(copy)

    def _finish(self, key: str, job: Future) -> None:
        error = None if job.cancelled() else job.exception()
        with self._lock:
            self._jobs.pop(key, None)
            if error is not None or job.cancelled():
                self._failed[key] = str(error or "cancelled")
        if error is not None:
            log.warning("no browser-playable copy %s: %s", key, error)

    def _keep_under_limit(self, keep: Path) -> None:
        """Remove the copies played longest ago until the folder is under ``max_bytes``
        (never ``keep``, the copy just made)."""
        copies = []
        for path in self.folder.glob("*.mp4"):
            try:
                stat = path.stat()
            except OSError:
                continue
            copies.append((stat.st_mtime, stat.st_size, path))
        total = sum(size for _, size, _ in copies)
        for _, size, path in sorted(copies):
            if total <= self.max_bytes:
                break
            if path != keep:
                path.unlink(missing_ok=True)
                total -= size

    def close(self) -> None:
        self._pool.shutdown(wait=False, cancel_futures=True)


def _touch(path: Path) -> None:
    """Mark a copy as just played (its modification time orders the cache's removals)."""
    try:
        os.utime(path)
    except OSError:
        pass


def video_html(collection, video_id, chosen=None, height: int = 220) -> str:
    """A compact ``<video>`` of ``video_id`` from the media folder, starting at the chosen
    caption's segment (``#t=start,end``): the file, or its browser-playable copy (with a
    note while it is made); or a line saying why there is none."""
    path = collection.media_path(video_id)
    fragment = "" if chosen is None else f"#t={chosen['start']:.2f},{chosen['end']:.2f}"
    if path is not None:
        note, pending = "", ""
        playback = getattr(collection, "playback", None)
        if playback is not None:
            source = playback.source(path)
            if source.path is None:
                return (f"<p>{html_text(video_id)} cannot be played in the browser: "
                        f"{html_text(source.note)}.</p>")
            path = source.path
            if not source.ready:
                pending = " data-pending='1'"
                note = (f"<p class='rudder-preparing'>Preparing {html_text(source.note)}; "
                        "it plays here when ready.</p>")
        src = "gradio_api/file=" + quote(str(path), safe="/") + fragment
        end = "" if chosen is None else f" data-segment-end='{float(chosen['end']):.2f}'"
        return (
            f"{note}<video controls preload='metadata' playsinline src='{html_text(src)}'"
            f"{end}{pending} style='width:100%;max-height:{height}px;background:#000'></video>"
        )
    if collection.media_dir is not None:
        return f"<p>No video file for {html_text(video_id)} in the media folder.</p>"
    return (
        "<p>No media folder: start the app with <code>--media DIR</code> holding "
        "<code>&lt;video_id&gt;.mp4</code> files to play videos.</p>"
    )
