"""Tiny test videos written with PyAV: a solid colour per segment, so a frame says its time."""

from pathlib import Path

import numpy as np

# (start, end, RGB) of each segment; the colours are far apart after YUV 4:2:0 compression.
SEGMENTS = ((0.0, 5.0, (220, 30, 30)), (5.0, 10.0, (30, 30, 220)))


def write_video(path: Path, segments=SEGMENTS, fps: int = 5, size=(64, 48),
                codec: str | None = None, pix_fmt: str | None = None) -> Path:
    """A video showing each segment's colour: ``codec`` (in ``pix_fmt``), else VP8 for
    .webm, MPEG-4 part 2 for .avi, else H.264 (MPEG-4 part 2 when libx264 is missing)."""
    import av

    width, height = size
    with av.open(str(path), "w") as container:
        codecs = ((codec,) if codec else ("libvpx",) if path.suffix == ".webm"
                  else ("mpeg4",) if path.suffix == ".avi" else ("libx264", "mpeg4"))
        for name in codecs:
            try:
                stream = container.add_stream(name, rate=fps)
                break
            except (av.error.FFmpegError, ValueError):
                if name == codecs[-1]:
                    raise
        stream.width, stream.height = width, height
        stream.pix_fmt = pix_fmt or ("yuvj420p" if name == "mjpeg" else "yuv420p")
        end = max(stop for _, stop, _ in segments)
        for i in range(round(end * fps)):
            seconds = i / fps
            colour = next(rgb for start, stop, rgb in segments if start <= seconds < stop)
            image = np.empty((height, width, 3), dtype=np.uint8)
            image[:] = colour
            frame = av.VideoFrame.from_ndarray(image, format="rgb24")
            for packet in stream.encode(frame):
                container.mux(packet)
        for packet in stream.encode():
            container.mux(packet)
    return path
