"""Opening video files with a frame-size limit (PyAV), for the video build and the app.

A few kilobytes of H.264 can declare 16000x16000 frames, 384 MB each once decoded, and
FFmpeg's stream probe in ``av.open`` decodes a first frame. :func:`open_video` passes
FFmpeg's ``max_pixels`` option to that probe and to the decoder, then refuses a stream
whose header states frames of more than ``max_pixels`` pixels (default :data:`MAX_PIXELS`,
4K UHD) before any frame is decoded. (A decoder FFmpeg could not open within the limit
leaves the size unknown: refused too, as over the limit or damaged.) Times in a file count
from the container's start time (:func:`origin`), as a player shows them.
"""

from __future__ import annotations

MAX_PIXELS = 3840 * 2160  # 4K UHD


class FrameSizeError(ValueError):
    """A video whose frames have more pixels than the limit; the message says both."""


def check_frame_size(width: int, height: int, max_pixels: int = MAX_PIXELS) -> None:
    """A :class:`FrameSizeError` for ``width x height`` frames over ``max_pixels``."""
    if width * height > max_pixels:
        raise FrameSizeError(
            f"its frames are {width}x{height} ({width * height / 1e6:.1f} megapixels), over "
            f"the limit of {max_pixels:,} pixels ({max_pixels / 1e6:.1f} megapixels; 4K UHD "
            f"3840x2160 by default)")


def open_video(path, max_pixels: int = MAX_PIXELS):
    """``av.open(path)`` with FFmpeg's ``max_pixels`` guard on the probe and on the first
    video stream's decoder; :class:`FrameSizeError` (the container closed) when the stream's
    header states larger frames. PyAV's own errors pass through."""
    import av

    limit = {"max_pixels": str(max_pixels)}
    container = av.open(str(path), options=limit)
    if container.streams.video:
        context = container.streams.video[0].codec_context
        try:
            if not context.width or not context.height:
                # FFmpeg clears a size over max_pixels when it opens the probe's decoder
                raise FrameSizeError(
                    f"its frame size is not known within the limit of {max_pixels:,} pixels "
                    "(frames larger than that, or a damaged stream)")
            check_frame_size(context.width, context.height, max_pixels)
        except FrameSizeError:
            container.close()
            raise
        context.options = limit
    return container


def origin(container) -> float:
    """The container's start time in seconds (0 when unset): times count from it."""
    start = container.start_time
    return start / 1_000_000 if start is not None else 0.0
