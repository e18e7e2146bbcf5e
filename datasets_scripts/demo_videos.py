"""Demo videos for the own-videos example: ``python -m datasets_scripts demo-videos OUT``.

Writes eight short synthetic clips (PyAV) to ``OUT/videos`` and their captions to
``OUT/captions.csv``, ready for ``python -m datasets_scripts build videos --src OUT/videos
--captions OUT/captions.csv --out ...``. Each clip is 160x120 at 12 fps, 4-11 s long: a
coloured background with a white square moving across it and a tone of its own pitch; the
square turns yellow during the clip's captioned segment. The files cover the containers
and codecs a folder of real videos mixes (MP4/H.264+AAC, Matroska without audio,
WebM/VP9+Opus, AVI/MPEG-4+MP3, QuickTime/MJPEG+PCM, MPEG-TS starting at 1.5 s), so the
app's playback of files browsers cannot play is part of the example. Per clip the
captions are an English and a Hindi whole-video caption and one English segment caption
(toy-making, as RUDDER's videos). The pictures are synthetic: a model trained on them
shows that the pipeline runs, not how well it retrieves.
"""

from __future__ import annotations

import csv
import io
from dataclasses import dataclass
from fractions import Fraction
from pathlib import Path

import numpy as np

from rudder.atomic import staged_folder, swap_into_place

from .build_report import BuildError

SIZE = (160, 120)
FPS = 12
AUDIO_RATE = 22050


@dataclass(frozen=True)
class Clip:
    stem: str
    suffix: str
    video_codec: str
    audio_codec: str | None
    seconds: float
    colour: tuple[int, int, int]
    tone: float
    segment: tuple[float, float]
    en: str
    hi: str
    segment_en: str
    offset: float = 0.0  # seconds of the first timestamp (a broadcast recording's)


CLIPS = (
    Clip("kite", ".mp4", "libx264", "aac", 6, (40, 90, 160), 440, (1.0, 3.0),
         "making a kite from old newspaper", "पुराने अख़बार से पतंग बनाना",
         "cutting the paper for the kite"),
    Clip("drum", ".mkv", "libx264", None, 4, (150, 60, 40), 0, (0.5, 2.0),
         "making a drum from a tin can", "टिन के डिब्बे से ढोल बनाना",
         "stretching paper over the can"),
    Clip("boat", ".webm", "libvpx-vp9", "libopus", 8, (30, 120, 130), 523, (2.0, 5.0),
         "folding a paper boat", "काग़ज़ की नाव बनाना", "folding the corners of the boat"),
    Clip("car", ".avi", "mpeg4", "libmp3lame", 5, (110, 110, 40), 587, (1.0, 2.5),
         "making a toy car from a matchbox", "माचिस की डिब्बी से खिलौना गाड़ी बनाना",
         "fixing the wheels of the car"),
    Clip("doll", ".mov", "mjpeg", "pcm_s16le", 7, (140, 50, 110), 659, (3.0, 6.0),
         "making a doll from cloth", "कपड़े से गुड़िया बनाना", "sewing the doll's dress"),
    Clip("top", ".ts", "libx264", "aac", 5, (60, 130, 60), 698, (1.0, 3.0),
         "making a spinning top from a bottle cap", "बोतल के ढक्कन से लट्टू बनाना",
         "spinning the top", offset=1.5),
    Clip("rattle", ".mp4", "libx264", "aac", 11, (90, 60, 140), 784, (4.0, 7.5),
         "making a rattle from a plastic bottle", "प्लास्टिक की बोतल से झुनझुना बनाना",
         "filling the bottle with seeds"),
    Clip("puppet", ".mp4", "libx264", "aac", 9, (160, 110, 50), 880, (2.0, 4.0),
         "making a puppet from a paper bag", "काग़ज़ के थैले से कठपुतली बनाना",
         "drawing a face on the puppet"),
)
PIXEL_FORMATS = {"mjpeg": "yuvj420p"}
VIDEO_OPTIONS = {
    "libx264": {"preset": "veryfast", "crf": "23"},
    "libvpx-vp9": {"deadline": "realtime", "cpu-used": "8", "crf": "32", "b:v": "0"},
    "mpeg4": {"qscale:v": "4"},
    "mjpeg": {"qscale:v": "4"},
}


def picture(clip: Clip, index: int) -> np.ndarray:
    """Frame ``index`` of ``clip``: its colour, a square crossing it (yellow in the segment)."""
    width, height = SIZE
    image = np.empty((height, width, 3), np.uint8)
    image[:] = clip.colour
    seconds = index / FPS
    side = height // 4
    x = round((width - side) * (seconds % 3.0) / 3.0)
    y = height // 2 - side // 2 + round(side * np.sin(2 * np.pi * seconds / 2))
    inside = clip.segment[0] <= seconds < clip.segment[1]
    image[y : y + side, x : x + side] = (240, 220, 40) if inside else (255, 255, 255)
    return image


def write_clip(clip: Clip, folder: Path) -> Path:
    """Write ``clip`` into ``folder`` as ``<stem><suffix>``."""
    import av

    path = folder / f"{clip.stem}{clip.suffix}"
    frames = round(clip.seconds * FPS)
    with av.open(str(path), "w") as container:
        video = container.add_stream(clip.video_codec, rate=FPS)
        video.width, video.height = SIZE
        video.pix_fmt = PIXEL_FORMATS.get(clip.video_codec, "yuv420p")
        video.options = dict(VIDEO_OPTIONS[clip.video_codec])
        sound = None
        if clip.audio_codec:
            rate = 48000 if clip.audio_codec == "libopus" else AUDIO_RATE
            sound = container.add_stream(clip.audio_codec, rate=rate)
            sound.layout = "mono"
        first = round(clip.offset * FPS)
        for index in range(frames):
            frame = av.VideoFrame.from_ndarray(picture(clip, index), format="rgb24")
            frame.pts, frame.time_base = first + index, Fraction(1, FPS)
            container.mux(video.encode(frame))
        container.mux(video.encode(None))
        if sound is not None:
            _write_tone(container, sound, clip)
    return path


def _write_tone(container, sound, clip: Clip) -> None:
    """A tone of ``clip.tone`` Hz over the clip, in the encoder's sample format."""
    import av

    rate = sound.codec_context.sample_rate
    size = sound.codec_context.frame_size or 1024
    total = round(clip.seconds * rate)
    wave = 0.3 * np.sin(2 * np.pi * clip.tone * np.arange(total) / rate)
    fmt = sound.codec_context.format.name
    first = round(clip.offset * rate)
    for start in range(0, total, size):
        piece = wave[start : start + size]
        if fmt.startswith("s16"):
            data = (piece * 32767).astype(np.int16)
        elif fmt.startswith("s32"):
            data = (piece * (2**31 - 1)).astype(np.int32)
        else:
            data = piece.astype(np.float32)
        data = data[None] if fmt.endswith("p") else data.reshape(1, -1)
        frame = av.AudioFrame.from_ndarray(data, format=fmt, layout="mono")
        frame.sample_rate, frame.pts, frame.time_base = rate, first + start, Fraction(1, rate)
        container.mux(sound.encode(frame))
    container.mux(sound.encode(None))


def captions_csv(clips=CLIPS) -> str:
    """The captions file: per clip an English and a Hindi whole-video caption and one
    English caption of its segment."""
    out = io.StringIO()
    writer = csv.writer(out, lineterminator="\n")
    writer.writerow(["video_id", "start", "end", "lang", "text"])
    for clip in clips:
        writer.writerow([clip.stem, "", "", "en", clip.en])
        writer.writerow([clip.stem, "", "", "hi", clip.hi])
        writer.writerow([clip.stem, f"{clip.segment[0]:.1f}", f"{clip.segment[1]:.1f}", "en",
                         clip.segment_en])
    return out.getvalue()


def write_demo(out, overwrite: bool = False, clips=CLIPS) -> Path:
    """Write ``out/videos/*`` and ``out/captions.csv`` (all or nothing)."""
    out = Path(out)
    if out.exists() and not out.is_dir():
        raise BuildError(f"{out} is a file, not a folder: name a new folder for the demo")
    if out.is_dir() and any(out.iterdir()) and not overwrite:
        raise BuildError(f"{out} is not empty; pass --overwrite to replace it, or name a new "
                         "folder")
    with staged_folder(out) as stage:
        (stage / "videos").mkdir()
        for clip in clips:
            write_clip(clip, stage / "videos")
        (stage / "captions.csv").write_text(captions_csv(clips), encoding="utf-8")
        swap_into_place(stage, out)
    return out
