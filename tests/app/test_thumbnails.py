"""Thumbnails show the frame the build decodes: times from the file's start time, upright."""


import numpy as np
import pytest

pytest.importorskip("av")

from app.thumbnails import Thumbnails, frame_at
from datasets_scripts.video_decode import iter_frames
from tests.datasets_scripts.video_files import picture, read_index, write_video

FPS = 25


def write_mpeg_ps(path, frames: int = 30, size=(64, 48)):
    """An MPEG-1 program stream (.mpg) whose frame ``i`` shows ``level(i)``; the muxer
    starts its clock after 0, so the container's start time is not 0."""
    import av

    width, height = size
    with av.open(str(path), "w", format="mpeg") as container:
        stream = container.add_stream("mpeg1video", rate=FPS)
        stream.width, stream.height, stream.pix_fmt = width, height, "yuv420p"
        stream.options = {"qscale": "2"}
        for index in range(frames):
            frame = av.VideoFrame.from_ndarray(picture(index, width, height), "rgb24")
            container.mux(stream.encode(frame))
        container.mux(stream.encode(None))
    return path


def build_index(path, seconds: float) -> int:
    """The frame index the build's decoder shows at ``seconds`` (centre crop, left part)."""
    (_, frames), = iter_frames(path, [("k", np.array([seconds]), 48, 48)])
    return read_index(frames[0][:, :16])


def left_index(image) -> int:
    array = np.asarray(image.convert("RGB"))
    return read_index(array[:, : array.shape[1] // 2])


def test_a_file_with_a_start_time_shows_the_frame_the_build_decodes(tmp_path):
    import av

    video = write_mpeg_ps(tmp_path / "clip.mpg")
    with av.open(str(video)) as container:
        assert container.start_time and container.start_time > 100_000  # > 0.1 s
    for index in (0, 3, 11, 17, 26):
        seconds = index / FPS  # frame ``index`` starts here, in the build's timeline
        assert build_index(video, seconds + 0.5 / FPS) == index
        assert left_index(frame_at(video, seconds)) == index
    thumbs = Thumbnails(tmp_path / "thumbs", width=32)
    from PIL import Image

    # the middle of 0.2-0.4 s is 0.3 s, between frames 7 (0.28 s) and 8 (0.32 s): frame 8
    assert left_index(Image.open(thumbs.path(video, 0.2, 0.4))) == 8


def test_a_rotated_video_gets_an_upright_thumbnail_like_the_build(tmp_path):
    video = write_video(tmp_path / "rot.mp4", rotation=90, marker=True, size=(64, 48),
                        audio=False)
    image = frame_at(video, 0.0)
    assert image.size == (48, 64)  # 64x48 coded, shown a quarter turn counter-clockwise
    array = np.asarray(image.convert("RGB")).astype(int)
    (_, frames), = iter_frames(video, [("k", np.array([0.0]), 48, 48)])
    built = frames[0].astype(int)  # the build's 48x48 centre crop of the upright frame
    assert np.abs(array[8:56] - built).mean() < 4
    red = (array[..., 0] > 200) & (array[..., 1] < 80)
    rows, cols = np.nonzero(red)
    assert rows.min() >= 40 and cols.max() < 24  # the top-left marker, now bottom-left
