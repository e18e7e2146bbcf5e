"""Frames and audio of one video file with PyAV, streamed with bounded memory.

Times are seconds from the start a player shows: ``pts * time_base`` minus the container's
start time, so variable frame rates, B-frames (frames come out of the decoder in
presentation order) and a non-zero first timestamp are exact. The frame *shown* at time
``t`` is the last frame whose timestamp is ``<= t`` (the first frame for earlier times), as a
player holds each frame until the next. Rotation metadata (the display matrix,
:attr:`av.VideoFrame.rotation`, counter-clockwise degrees) is applied, so frames are upright.

Each frame is scaled so its shorter side is ``resize`` pixels (FFmpeg's swscale, bilinear),
then centre-cropped to ``crop x crop``: the evaluation transform of torchvision's ImageNet
and Kinetics models (``Resize(256) + CenterCrop(224)``; ``Resize((128, 171)) +
CenterCrop(112)`` for the video models, which we approximate by the shorter side).

Audio is decoded and resampled with :class:`av.AudioResampler` to mono float32 at the
rate an audio expert needs.

Frames of more than ``max_pixels`` pixels (default :data:`MAX_PIXELS`, 4K UHD) are refused
from the stream's header, before any frame is decoded (:func:`rudder.media.open_video`:
FFmpeg's own ``max_pixels`` guard on the stream probe and the decoder).

The duration is the end of the last packet minus the container's start time. A container
states its duration either from its start (MP4, MPEG-TS) or from time 0 (Matroska written
with a timestamp offset, e.g. ``ffmpeg -output_ts_offset 7`` or a ``-copyts`` remux): when
the start is not 0, the reading that agrees with the last packets' timestamps is taken.
"""

from __future__ import annotations

import math
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from rudder.media import MAX_PIXELS, FrameSizeError, open_video
from rudder.media import origin as _origin

VIDEO_SUFFIXES = (".mp4", ".webm", ".mkv", ".mov", ".avi", ".m4v", ".mpg", ".mpeg", ".ogv", ".flv",
                  ".ts", ".m2ts", ".mts", ".3gp", ".wmv")
TRUNCATED_SECONDS = 1.0  # frames ending this long before the stated duration: truncated
UNREADABLE = "unreadable video"  # the kinds of VideoError the build report counts
TOO_LARGE = "frames over the pixel limit"
TRUNCATED = "truncated video"


class VideoError(Exception):
    """A file that cannot be decoded; ``str(error)`` is the reason, without the file name,
    and ``kind`` the class of reason the build report counts (:data:`UNREADABLE`,
    :data:`TOO_LARGE`, :data:`TRUNCATED`)."""

    def __init__(self, reason: str, kind: str = UNREADABLE):
        super().__init__(reason)
        self.kind = kind


@dataclass(frozen=True)
class VideoInfo:
    """What a build needs to know of a file before decoding it."""

    duration: float  # seconds, from the container (or the last frame's end)
    has_audio: bool
    rotation: int  # counter-clockwise degrees of the display matrix
    width: int  # coded size, before rotation
    height: int
    video_duration: float | None = None  # the video stream's own, when the file states it


def open_container(path, max_pixels: int = MAX_PIXELS):
    """``av.open(path)`` with a :class:`VideoError` for an empty, unreadable or non-video
    file, or one whose frames have more than ``max_pixels`` pixels (checked from the
    stream's header, before any frame is decoded)."""
    import av

    path = Path(path)
    try:
        size = path.stat().st_size
    except OSError as error:
        raise VideoError(f"cannot read it ({error.strerror})") from None
    if size == 0:
        raise VideoError("zero-length file")
    if not os.access(path, os.R_OK):
        raise VideoError("cannot read it (permission denied)")
    try:
        container = open_video(path, max_pixels)
    except FrameSizeError as error:
        raise VideoError(str(error), TOO_LARGE) from None
    except (av.FFmpegError, OSError, UnicodeDecodeError) as error:
        raise VideoError(f"not a readable video ({_reason(error)})") from None
    if not container.streams.video:
        container.close()
        raise VideoError("no video stream")
    return container


def _reason(error) -> str:
    return str(getattr(error, "strerror", None) or error).strip() or type(error).__name__


def probe(path, max_pixels: int = MAX_PIXELS) -> VideoInfo:
    """Duration, audio presence and rotation of a file; demuxes (without decoding) only
    when the container does not state its duration, or its last packets when the
    container's start time is not 0 (module docstring)."""
    with open_container(path, max_pixels) as container:
        stream = container.streams.video[0]
        duration = None
        if container.duration is not None and container.duration > 0:
            duration = container.duration / 1_000_000
        elif stream.duration is not None and stream.time_base is not None:
            duration = float(stream.duration * stream.time_base)
        if not duration:
            duration = _demuxed_duration(container, stream)
        video_duration = None
        if stream.duration is not None and stream.time_base is not None:
            video_duration = float(stream.duration * stream.time_base)
        rotation = 0
        try:
            first = next(container.decode(stream))
            rotation = int(first.rotation or 0)
        except StopIteration:
            raise VideoError("no decodable video frame") from None
        except Exception as error:  # noqa: BLE001 - any FFmpeg failure means "unreadable"
            raise VideoError(f"cannot decode its first frame ({_reason(error)})") from None
        origin = _origin(container)
        if origin > 0 and container.duration:
            duration = _from_start(duration, origin, _packets_end(container))
        return VideoInfo(
            duration=float(duration),
            has_audio=bool(container.streams.audio),
            rotation=rotation,
            width=stream.codec_context.width,
            height=stream.codec_context.height,
            video_duration=video_duration,
        )


def _packets_end(container) -> float | None:
    """The latest end (seconds, as stored: from time 0) of the packets after the last
    keyframe before the stated end; None when the file cannot be demuxed there."""
    import av

    end = None
    try:
        target = (container.start_time or 0) + (container.duration or 0)
        container.seek(target, backward=True, any_frame=False)
        for packet in container.demux():
            if packet.pts is not None and packet.time_base is not None:
                stop = float((packet.pts + (packet.duration or 0)) * packet.time_base)
                end = stop if end is None else max(end, stop)
    except (av.FFmpegError, OSError, ValueError):
        return end
    return end


def _from_start(stated: float, origin: float, end: float | None) -> float:
    """The duration from the start time ``origin``: ``stated - origin`` when the container
    counted it from time 0 (it then matches the packets' ``end`` within a second, and
    better than ``end - origin`` does), else ``stated``. A truncated file's packets end
    early and match neither: ``stated`` stands, and decoding finds the truncation."""
    if end is None:
        return stated
    from_zero, from_start = abs(end - stated), abs(end - origin - stated)
    if from_zero <= TRUNCATED_SECONDS and from_zero < from_start:
        return stated - origin
    return stated


def _demuxed_duration(container, stream) -> float:
    origin, end = _origin(container), 0.0
    for packet in container.demux(stream):
        if packet.pts is not None and packet.time_base is not None:
            end = max(end, float((packet.pts + (packet.duration or 0)) * packet.time_base))
    container.seek(0)
    if end <= origin:
        raise VideoError("its duration is unknown and no packet has a timestamp")
    return end - origin


def sample_times(start: float, end: float, fps: float) -> np.ndarray:
    """Frame times of a segment at ``fps``: the centres ``start + (k + 0.5) / fps`` that lie
    before ``end`` (``k = 0, 1, ...``); a segment shorter than half a period gets its
    midpoint. (The centre rule is CE's/MMT's frame-per-second sampling, shifted by half a
    period so a segment's first and last frames lie inside it.)"""
    count = math.ceil((end - start) * fps - 0.5)
    if count < 1:
        return np.array([(start + end) / 2], dtype=np.float64)
    return start + (np.arange(count, dtype=np.float64) + 0.5) / fps


def _upright_crop(frame, resize: int, crop: int, reformatter=None) -> np.ndarray:
    """``frame`` as an upright ``(crop, crop, 3)`` uint8 RGB array (module docstring).
    ``reformatter``: an :class:`av.video.reformatter.VideoReformatter` kept across frames,
    whose scaler is set up once (the same pixels, about 4x faster than one per frame)."""
    from av.video.reformatter import VideoReformatter

    rotation = round((frame.rotation or 0) / 90) % 4
    width, height = frame.width, frame.height
    short = min(width, height)
    scaled_w = max(crop, round(width * resize / short))
    scaled_h = max(crop, round(height * resize / short))
    image = (reformatter or VideoReformatter()).reformat(
        frame, width=scaled_w, height=scaled_h, format="rgb24", interpolation="BILINEAR"
    ).to_ndarray()
    if rotation:
        image = np.rot90(image, rotation)
    top = (image.shape[0] - crop) // 2
    left = (image.shape[1] - crop) // 2
    return np.ascontiguousarray(image[top : top + crop, left : left + crop])



def iter_frames(path, targets, chunk: int = 32, duration: float | None = None,
                max_pixels: int = MAX_PIXELS, decoding: str = "auto"):
    """Decode ``path`` once and yield ``(key, frames)`` chunks for every target.

    ``targets``: ``[(key, times, resize, crop), ...]`` with ``times`` ascending. ``frames``
    is a ``(n, crop, crop, 3)`` uint8 array of the frames shown at the next ``n`` of the
    key's times (``n <= chunk``); a key's chunks come in time order and cover its times.
    Only the open chunks are held in memory, so a long video costs no more than a short
    one. With ``duration`` (the video stream's, else the container's), a file whose
    frames stop over a second before it (a truncated download) raises
    :class:`VideoError` once decoded, instead of holding its last frame to the end.
    Frames over ``max_pixels`` pixels are refused (:func:`open_container`). ``decoding``:
    which frames are decoded (:mod:`datasets_scripts.video_sparse`: ``"auto"`` picks dense
    or sparse per file; the frames given are the same).
    """
    from av.video.reformatter import VideoReformatter

    from .video_sparse import DECODINGS, decoded_frames

    if decoding not in DECODINGS:
        raise ValueError(f"decoding {decoding!r}: use one of {DECODINGS}")

    wanted = sorted(
        (float(t), index, position)
        for index, (_, times, _, _) in enumerate(targets)
        for position, t in enumerate(times)
    )
    buffers: list[list[Any]] = [[] for _ in targets]
    next_target, shown, converted = 0, None, {}
    scalers: dict = {}  # (resize, crop) -> a VideoReformatter kept for the file

    def emit(frame, upto):
        nonlocal next_target
        while next_target < len(wanted) and wanted[next_target][0] < upto:
            _, index, _ = wanted[next_target]
            key, _, resize, crop = targets[index]
            if (resize, crop) not in converted:
                scaler = scalers.setdefault((resize, crop), VideoReformatter())
                converted[resize, crop] = _upright_crop(frame, resize, crop, scaler)
            buffers[index].append(converted[resize, crop])
            next_target += 1
            if len(buffers[index]) == chunk:
                yield key, np.stack(buffers[index])
                buffers[index] = []

    with open_container(path, max_pixels) as container:
        stream = container.streams.video[0]
        stream.thread_type = "AUTO"
        origin = _origin(container)
        try:
            for frame in decoded_frames(path, container, stream, [w[0] for w in wanted],
                                        origin, decoding):
                if frame.pts is None or frame.time_base is None:
                    continue
                time = float(frame.pts * frame.time_base) - origin
                if shown is None:  # times before the first frame show the first frame
                    yield from emit(frame, time)
                    shown = frame
                    continue
                yield from emit(shown, time)
                if next_target == len(wanted):
                    break
                shown, converted = frame, {}
        except Exception as error:  # noqa: BLE001 - a broken stream mid-file
            raise VideoError(f"cannot decode it ({_reason(error)})") from None
        if shown is None:
            raise VideoError("no decodable video frame")
        last = float(shown.pts * shown.time_base) - origin
        if duration is not None and next_target < len(wanted) and (
            last < duration - TRUNCATED_SECONDS
        ):
            raise VideoError(f"truncated: its frames stop at {last:.2f} s of the "
                             f"{duration:.2f} s it states", TRUNCATED)
        yield from emit(shown, math.inf)
    for index, buffer in enumerate(buffers):
        if buffer:
            yield targets[index][0], np.stack(buffer)


def iter_audio(path, rate: int, segments, block: int, max_pixels: int = MAX_PIXELS):
    """Decode the first audio stream as mono float32 at ``rate`` Hz and yield ``(key,
    samples)`` pieces of each segment (``segments``: ``[(key, start, end), ...]`` in
    seconds), at most ``block`` samples per piece, in time order per key. Nothing when the
    file has no audio stream. Memory: one decoded frame plus the open pieces."""
    import av

    with open_container(path, max_pixels) as container:
        if not container.streams.audio:
            return
        stream = container.streams.audio[0]
        origin = _origin(container)
        resampler = av.AudioResampler(format="flt", layout="mono", rate=rate)
        bounds = [(key, round(start * rate), round(end * rate)) for key, start, end in segments]
        buffers: dict[Any, list[Any]] = {key: [] for key, _, _ in bounds}
        sizes = dict.fromkeys(buffers, 0)
        position = None  # sample index (at ``rate``) of the next resampled sample

        def take(samples, first):
            for key, lo, hi in bounds:
                a, b = max(lo, first), min(hi, first + len(samples))
                if a >= b:
                    continue
                piece = samples[a - first : b - first]
                while len(piece):
                    room = block - sizes[key]
                    buffers[key].append(piece[:room])
                    sizes[key] += len(piece[:room])
                    piece = piece[room:]
                    if sizes[key] == block:
                        yield key, np.concatenate(buffers[key])
                        buffers[key], sizes[key] = [], 0

        def resampled(frames, first: int):
            """The pieces of ``frames``, whose first sample has index ``first``; returns the
            index of the sample after them."""
            for out in frames:
                samples = out.to_ndarray().reshape(-1).astype(np.float32, copy=False)
                yield from take(samples, first)
                first += len(samples)
            return first

        try:
            for frame in container.decode(stream):
                if position is None:
                    start = frame.time if frame.time is not None else origin
                    position = max(0, round((start - origin) * rate))
                position = yield from resampled(resampler.resample(frame), position)
            if position is not None:
                yield from resampled(resampler.resample(None), position)
        except av.FFmpegError:
            pass  # a broken audio tail: the samples decoded so far are kept
    for key, buffer in buffers.items():
        if buffer:
            yield key, np.concatenate(buffer)
