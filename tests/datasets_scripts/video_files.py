"""Tiny test videos written with PyAV: frame ``i`` shows its index as the brightness of its
left half (``level(i)``), a white square moving across its right half, and a tone.

``read_index(frame)`` recovers ``i`` from a decoded RGB frame (any crop that keeps some
of the left half), so a test can check which frame a sampled time showed.
"""

from __future__ import annotations

from fractions import Fraction
from pathlib import Path

import numpy as np

CODECS = {  # suffix -> (video codec, audio codec)
    ".mp4": ("libx264", "aac"),
    ".webm": ("libvpx-vp9", "libopus"),
    ".mkv": ("libx264", "flac"),
    ".ts": ("libx264", "aac"),
}
STEP, BASE, LEVELS = 6, 20, 36


def level(index: int) -> int:
    return BASE + STEP * (index % LEVELS)


def read_index(left_half: np.ndarray) -> int:
    """The frame index (mod 36) shown by an RGB array's left half (the mean brightness)."""
    return round((float(left_half.mean()) - BASE) / STEP) % LEVELS


def picture(index: int, width: int, height: int, marker: bool = False) -> np.ndarray:
    image = np.zeros((height, width, 3), np.uint8)
    image[:, : width // 2] = level(index)
    side = max(4, height // 6)
    x = width // 2 + (index * 3) % max(1, width // 2 - side)
    image[height // 2 - side // 2 : height // 2 + side // 2, x : x + side] = 255
    if marker:  # a red block in the top-left corner, to see where rotation puts it
        image[: height // 4, : width // 4] = (255, 0, 0)
    return image


def write_video(
    path,
    times=None,
    *,
    frames: int = 24,
    fps: int = 12,
    size=(64, 48),
    audio: bool = True,
    rate: int = 16000,
    rotation: int = 0,
    marker: bool = False,
    tone: float = 440.0,
    audio_seconds: float | None = None,
    offset: float = 0.0,
) -> Path:
    """Write a small video; ``times`` (seconds, ascending) makes it variable-frame-rate;
    ``offset`` seconds are added to every timestamp (the container then starts there, as
    after ``ffmpeg -output_ts_offset`` or a ``-copyts`` remux)."""
    import av

    path = Path(path)
    video_codec, audio_codec = CODECS[path.suffix]
    width, height = size
    times = list(times) if times is not None else [i / fps for i in range(frames)]
    with av.open(str(path), "w") as container:
        stream = container.add_stream(video_codec, rate=fps)
        stream.width, stream.height, stream.pix_fmt = width, height, "yuv420p"
        stream.time_base = Fraction(1, 1000)
        stream.codec_context.time_base = Fraction(1, 1000)
        if video_codec == "libx264":
            stream.options = {"crf": "10", "preset": "fast"}  # "fast" makes B-frames
        else:
            stream.options = {"crf": "10", "b:v": "0", "deadline": "realtime", "cpu-used": "8"}
        if rotation:
            stream.set_display_rotation(rotation)
        sound = None
        if audio:
            sound = container.add_stream(audio_codec, rate=48000 if audio_codec == "libopus"
                                         else rate)
            sound.layout = "mono"
        for index, time in enumerate(times):
            frame = av.VideoFrame.from_ndarray(picture(index, width, height, marker), "rgb24")
            frame.pts = round((time + offset) * 1000)
            frame.time_base = Fraction(1, 1000)
            container.mux(stream.encode(frame))
        container.mux(stream.encode(None))
        if sound is not None:
            _write_tone(container, sound, audio_seconds or times[-1] + 1 / fps, tone, offset)
    return path


def _write_tone(container, sound, seconds: float, tone: float, offset: float = 0.0) -> None:
    import av

    rate = sound.codec_context.sample_rate
    size = sound.codec_context.frame_size or 1024
    total = int(seconds * rate)
    wave = (0.3 * np.sin(2 * np.pi * tone * np.arange(total) / rate)).astype(np.float32)
    fmt = sound.codec_context.format.name
    for start in range(0, total, size):
        piece = wave[start : start + size]
        if fmt.startswith("s16"):
            data = (piece * 32767).astype(np.int16)[None]
        elif fmt.startswith("s32"):
            data = (piece * 2**31 * 0.99).astype(np.int32)[None]
        else:
            data = piece[None]
        frame = av.AudioFrame.from_ndarray(data, format=fmt, layout="mono")
        frame.sample_rate, frame.pts = rate, start + round(offset * rate)
        frame.time_base = Fraction(1, rate)
        container.mux(sound.encode(frame))
    container.mux(sound.encode(None))
