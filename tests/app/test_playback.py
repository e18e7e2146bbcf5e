"""Playback in the browser: which files browsers play as they are, the H.264/AAC copies of
the others (same frames at the same times, made once, in the background, within a size
bound), the MIME types served, and the player's HTML while a copy is made."""

import mimetypes
import time

import numpy as np
import pytest

pytest.importorskip("av")

from app.playback import Playback, browser_problem, register_media_types, transcode
from tests.datasets_scripts.video_files import read_index
from tests.datasets_scripts.video_files import write_video as write_indexed

from .videos import write_video


@pytest.mark.parametrize("name, codec, pix_fmt, playable", [
    ("a.mp4", "libx264", None, True),
    ("a.webm", "libvpx", None, True),
    ("a.webm", "libvpx-vp9", None, True),
    ("a.m4v", "libx264", None, True),
    ("a.avi", "mpeg4", None, False),
    ("a.ts", "libx264", None, False),
    ("a.mov", "mjpeg", None, False),
    ("a.mov", "libx264", None, False),  # QuickTime: Chrome does not play video/quicktime
    ("a.mkv", "libx264", None, False),
    ("a.mp4", "libx265", None, False),  # HEVC
    ("a.mpg", "mpeg2video", None, False),
    ("a.mp4", "mpeg4", None, False),  # MPEG-4 Part 2 in MP4
    ("a.mp4", "libx264", "yuv420p10le", False),  # 10-bit H.264
    ("a.mp4", "libx264", "yuv444p", False),
])
def test_which_files_browsers_play_as_they_are(tmp_path, name, codec, pix_fmt, playable):
    path = write_video(tmp_path / name, codec=codec, pix_fmt=pix_fmt, segments=((0, 1, (9, 9, 9)),))
    problem = browser_problem(path)
    assert (problem == "") == playable, problem


def frame_indices(path, times):
    """The frame index (tests.datasets_scripts.video_files) shown at each time of ``path``,
    times from the container's start."""
    import av

    with av.open(str(path)) as container:
        start = (container.start_time or 0) / 1e6
        frames = [(f.time - start, f.to_ndarray(format="rgb24")) for f in
                  container.decode(video=0)]
    shown = []
    for t in times:
        before = [image for when, image in frames if when <= t + 1e-6] or [frames[0][1]]
        shown.append(read_index(before[-1][:, : before[-1].shape[1] // 2]))
    return shown


@pytest.mark.parametrize("name, offset", [("a.ts", 0.0), ("a.ts", 7.0), ("a.mkv", 7.0)])
def test_a_copy_shows_the_same_frame_at_the_same_time(tmp_path, name, offset):
    import av

    source = write_indexed(tmp_path / name, frames=36, fps=12, offset=offset)
    copy = tmp_path / "copy.mp4"
    transcode(source, copy)
    assert browser_problem(copy) == ""
    with av.open(str(copy)) as container:
        assert container.streams.audio[0].codec_context.name == "aac"
        assert container.start_time == 0 or container.start_time / 1e6 < 0.1
    times = np.arange(0.04, 2.9, 0.25)
    assert frame_indices(copy, times) == frame_indices(source, times)


def test_large_frames_are_scaled_to_fit_720p(tmp_path):
    import av

    source = write_video(tmp_path / "big.avi", size=(1920, 1088), segments=((0, 0.4, (9, 9, 9)),))
    transcode(source, tmp_path / "big.mp4")
    with av.open(str(tmp_path / "big.mp4")) as container:
        context = container.streams.video[0].codec_context
        assert (context.width, context.height) == (1270, 720)


def test_sources_are_the_file_or_its_copy_made_once(tmp_path):
    media = tmp_path / "media"
    media.mkdir()
    mp4 = write_video(media / "a.mp4")
    avi = write_video(media / "b.avi")
    playback = Playback(tmp_path / "copies")
    assert playback.source(mp4).path == mp4 and playback.source(mp4).ready
    first = playback.source(avi)
    assert first.path.parent == tmp_path / "copies" and first.path.suffix == ".mp4"
    assert "AVI" in first.note and "mpeg4 video" in first.note
    done = playback.wait(avi, timeout=60)
    assert done.ready and done.path == first.path and done.path.is_file()
    stamp = done.path.stat().st_mtime_ns
    again = playback.source(avi)
    assert again.ready and again.path == first.path
    assert len(list((tmp_path / "copies").glob("*.mp4"))) == 1
    time.sleep(0.01)
    avi.write_bytes(avi.read_bytes())  # a replaced file gets a new copy
    assert playback.wait(avi, timeout=60).path != first.path
    assert stamp  # the first copy was not rewritten while it was current
    broken = media / "c.avi"
    broken.write_bytes(b"not a video" * 10)
    assert playback.source(broken).path is None
    assert "not a readable video" in playback.source(broken).note
    playback.close()


def test_frames_over_the_pixel_limit_are_not_played(tmp_path):
    mp4 = write_video(tmp_path / "a.mp4", size=(64, 48))  # H.264: its parser gives the size
    source = Playback(tmp_path / "copies", max_pixels=64 * 48 - 1).source(mp4)
    assert source.path is None and "its frames are 64x48" in source.note
    avi = write_video(tmp_path / "b.avi", size=(64, 48))  # MPEG-4 Part 2: the size is cleared
    source = Playback(tmp_path / "copies", max_pixels=64 * 48 - 1).source(avi)
    assert source.path is None
    assert "frame size is not known within the limit of 3,071 pixels" in source.note
    assert not (tmp_path / "copies").exists() or not list((tmp_path / "copies").iterdir())


def test_the_copies_stay_under_the_size_bound(tmp_path):
    media = tmp_path / "media"
    media.mkdir()
    files = [write_video(media / f"{i}.avi") for i in range(3)]
    playback = Playback(tmp_path / "copies", max_bytes=1)
    kept = [playback.wait(f, timeout=60).path for f in files]
    assert [p.name for p in (tmp_path / "copies").glob("*.mp4")] == [kept[-1].name]


def test_every_video_suffix_has_its_media_type():
    import gradio.routes  # noqa: F401  (runs mimetypes.init(), which resets the table)

    register_media_types()
    assert mimetypes.guess_type("x.ts")[0] == "video/mp2t"
    assert mimetypes.guess_type("x.avi")[0] == "video/x-msvideo"
    assert mimetypes.guess_type("x.mp4")[0] == "video/mp4"
    assert mimetypes.guess_type("x.mkv")[0] == "video/x-matroska"


def test_the_player_says_a_copy_is_being_made(tmp_path, app_dataset):
    from app.collection import Collection
    from app.playback import video_html

    media = tmp_path / "media"
    media.mkdir()
    write_video(media / "v000.avi")
    collection = Collection(app_dataset, media)
    collection.playback = Playback(tmp_path / "copies")
    html = video_html(collection, "v000", {"start": 1.0, "end": 4.5})
    assert "data-pending='1'" in html and "rudder-preparing" in html
    assert "Preparing AVI (Audio Video Interleaved) with mpeg4 video" in html
    assert ".mp4#t=1.00,4.50'" in html and "/copies/" in html
    collection.playback.wait(media / "v000.avi", timeout=60)
    html = video_html(collection, "v000", {"start": 1.0, "end": 4.5})
    assert "data-pending" not in html and "rudder-preparing" not in html
