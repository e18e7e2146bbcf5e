"""Decoding own videos with PyAV: which frame a sampled time shows, rotation, audio, errors,
bounded memory (``datasets_scripts.video_decode``)."""

import math
import tracemalloc

import numpy as np
import pytest

pytest.importorskip("av")

from datasets_scripts.video_decode import (
    VideoError,
    iter_audio,
    iter_frames,
    probe,
    sample_times,
)

from .video_files import read_index, write_video


def frames_at(path, times, resize=48, crop=32, chunk=32):
    chunks = [f for _, f in iter_frames(path, [("k", np.asarray(times), resize, crop)], chunk)]
    return np.concatenate(chunks)


def shown_index(frames):
    """Indices shown by centre-cropped frames: the crop keeps the left half's right part."""
    return [read_index(f[:, :4]) for f in frames]


def test_sample_times_are_period_centres_inside_the_segment():
    assert sample_times(0.0, 2.0, 2.0).tolist() == [0.25, 0.75, 1.25, 1.75]
    assert sample_times(1.0, 2.2, 1.0).tolist() == [1.5]  # 2.5 would be past the end
    assert sample_times(3.0, 3.2, 1.0).tolist() == [3.1]  # shorter than half a period
    times = sample_times(0.3, 10.0, 3.0)
    assert times[0] > 0.3 and times[-1] < 10.0 and np.allclose(np.diff(times), 1 / 3)


@pytest.mark.parametrize("suffix", [".mp4", ".webm", ".mkv"])
def test_sampled_frames_are_the_ones_shown_at_their_times(tmp_path, suffix):
    path = write_video(tmp_path / f"v{suffix}", frames=30, fps=12)
    info = probe(path)
    assert info.duration == pytest.approx(2.5, abs=0.02) and info.has_audio
    if suffix != ".webm":  # H.264 with B-frames: decode order differs from display order
        import av

        with av.open(str(path)) as container:
            frames = list(container.decode(video=0))
        assert any(int(f.pict_type) == 3 for f in frames)  # AV_PICTURE_TYPE_B
    times = sample_times(0.0, info.duration, 5.0)
    expected = [min(math.floor(t * 12 + 1e-9), 29) for t in times]  # the last frame holds
    assert shown_index(frames_at(path, times)) == expected


def test_variable_frame_rate_and_times_before_the_first_frame(tmp_path):
    stamps = [0.2, 0.3, 0.7, 0.75, 1.4, 2.2]  # frame i shows from stamps[i]
    path = write_video(tmp_path / "vfr.mp4", times=stamps)
    times = [0.0, 0.25, 0.69, 0.72, 0.8, 1.39, 1.5, 3.0]
    assert shown_index(frames_at(path, times)) == [0, 0, 1, 2, 3, 3, 4, 5]


def test_chunks_cover_every_time_in_order(tmp_path):
    path = write_video(tmp_path / "v.mp4", frames=24, fps=12)
    times = sample_times(0.0, 2.0, 12.0)
    chunks = list(iter_frames(path, [("a", times, 48, 32), ("b", times[::4], 64, 48)], 5))
    a = [f for k, f in chunks if k == "a"]
    assert [len(f) for f in a] == [5, 5, 5, 5, 4]
    assert shown_index(np.concatenate(a)) == list(range(24))
    b = np.concatenate([f for k, f in chunks if k == "b"])
    assert b.shape == (6, 48, 48, 3) and shown_index(b) == list(range(0, 24, 4))


def test_rotation_metadata_is_applied(tmp_path):
    path = write_video(tmp_path / "rot.mp4", rotation=90, marker=True, size=(64, 48))
    assert probe(path).rotation == 90
    frame = frames_at(path, [0.1], resize=48, crop=48)[0]
    # 64x48 coded, shown 90 degrees counter-clockwise: 48 wide, 64 high, the top-left
    # marker at the bottom-left; the 48x48 centre crop keeps its lowest rows
    red = (frame[..., 0] > 200) & (frame[..., 1] < 80)
    rows, cols = np.nonzero(red)
    assert rows.min() > 24 and cols.max() < 24
    upright = frames_at(write_video(tmp_path / "up.mp4", marker=True), [0.1], 48, 48)[0]
    rows, cols = np.nonzero((upright[..., 0] > 200) & (upright[..., 1] < 80))
    assert rows.max() < 24 and cols.max() < 24


def test_audio_is_resampled_mono_at_the_requested_rate(tmp_path):
    path = write_video(tmp_path / "v.mkv", frames=24, fps=12, rate=44100, tone=1000.0)
    pieces = list(iter_audio(path, 16000, [("all", 0.0, 2.0), ("part", 0.5, 1.0)], 4000))
    whole = np.concatenate([p for k, p in pieces if k == "all"])
    part = np.concatenate([p for k, p in pieces if k == "part"])
    assert len(whole) == pytest.approx(32000, abs=10) and len(part) == 8000
    assert max(len(p) for _, p in pieces) <= 4000
    spectrum = np.abs(np.fft.rfft(whole[:16000]))
    assert np.argmax(spectrum) == pytest.approx(1000, abs=2)  # 1 Hz bins: the tone survives
    assert np.allclose(part, whole[8000:16000], atol=1e-6)


def test_no_audio_track_yields_nothing(tmp_path):
    path = write_video(tmp_path / "silent.mp4", audio=False)
    assert not probe(path).has_audio
    assert list(iter_audio(path, 16000, [("all", 0.0, 2.0)], 4000)) == []


def test_unreadable_files_give_the_reason(tmp_path):
    (tmp_path / "empty.mp4").write_bytes(b"")
    (tmp_path / "junk.mp4").write_bytes(b"not a video at all" * 50)
    good = write_video(tmp_path / "good.mp4").read_bytes()
    (tmp_path / "cut.mp4").write_bytes(good[: len(good) // 3])
    with pytest.raises(VideoError, match="zero-length file"):
        probe(tmp_path / "empty.mp4")
    with pytest.raises(VideoError, match="not a readable video"):
        probe(tmp_path / "junk.mp4")
    with pytest.raises(VideoError, match="cannot read it"):
        probe(tmp_path / "absent.mp4")
    with pytest.raises(VideoError):  # the moov atom is at the end: a cut mp4 cannot open
        probe(tmp_path / "cut.mp4")


def test_truncated_file_is_an_error_not_a_held_frame(tmp_path):
    data = write_video(tmp_path / "full.mkv", frames=48).read_bytes()
    cut = tmp_path / "cut.mkv"
    cut.write_bytes(data[: len(data) * 6 // 10])
    info = probe(cut)  # the header still states 4 s
    times = sample_times(0.0, info.duration, 4.0)
    with pytest.raises(VideoError, match=r"truncated: its frames stop at 2\.\d\d s of the 4\.00"):
        list(iter_frames(cut, [("k", times, 48, 32)], duration=info.duration))
    full = tmp_path / "full.mkv"
    assert len(frames_at(full, times)) == 16  # the whole file passes the same check
    list(iter_frames(full, [("k", times, 48, 32)], duration=probe(full).duration))
    # audio longer than the video (the container's duration) is no truncation
    long_audio = write_video(tmp_path / "a.mp4", frames=12, audio_seconds=4.0)
    info = probe(long_audio)
    assert info.duration > 3.9 and info.video_duration < 1.1
    times = sample_times(0.0, info.duration, 4.0)
    list(iter_frames(long_audio, [("k", times, 48, 32)], duration=info.video_duration
                     or info.duration))


def test_long_video_is_streamed_with_bounded_memory(tmp_path):
    path = write_video(tmp_path / "long.mp4", frames=1500, fps=25, audio=False)
    times = sample_times(0.0, probe(path).duration, 25.0)
    tracemalloc.start()
    count, total = 0, 0
    for _, frames in iter_frames(path, [("k", times, 48, 32)], chunk=32):
        count += len(frames)
        total += frames.nbytes
        del frames
    _, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    assert count == 1500 and total > 4_000_000
    assert peak < 1_000_000, f"peak {peak} bytes: frames were accumulated"


@pytest.mark.parametrize("suffix", [".mkv", ".ts", ".mp4"])
@pytest.mark.parametrize("offset", [7.0, 0.5])
def test_a_container_starting_after_zero_lasts_end_minus_start(tmp_path, suffix, offset):
    """Matroska written with a timestamp offset (ffmpeg -output_ts_offset, a -copyts remux)
    states its duration from time 0: 9 s for 2 s of video starting at 7 s."""
    path = write_video(tmp_path / f"start{suffix}", frames=24, fps=12, offset=offset)
    info = probe(path)
    assert info.duration == pytest.approx(2.0, abs=0.15)
    import av

    with av.open(str(path)) as container:  # times count from the container's start, which
        stream = container.streams.video[0]  # AAC's priming puts 64 ms before the video
        first = float(stream.start_time * stream.time_base) - container.start_time / 1e6
    times = sample_times(0.0, info.duration, 4.0)
    frames = [f for _, f in iter_frames(path, [("k", times, 48, 32)],
                                        duration=info.video_duration or info.duration)]
    expected = [min(max(0, math.floor((t - first) * 12)), 23) for t in times]
    assert shown_index(np.concatenate(frames)) == expected
    pieces = [p for _, p in iter_audio(path, 16000, [("all", 0.0, info.duration)], 64000)]
    assert len(np.concatenate(pieces)) == pytest.approx(16000 * info.duration, rel=0.06)


def test_frames_over_the_pixel_limit_are_refused_from_the_header(tmp_path):
    from datasets_scripts.video_decode import MAX_PIXELS, TOO_LARGE, open_container

    path = write_video(tmp_path / "v.mp4", size=(64, 48), audio=False)
    with pytest.raises(VideoError, match=r"its frames are 64x48 \(0\.0 megapixels\), over the "
                       r"limit of 3,000 pixels") as refused:
        probe(path, max_pixels=3000)
    assert refused.value.kind == TOO_LARGE
    with pytest.raises(VideoError, match="64x48"):
        list(iter_frames(path, [("k", [0.1], 48, 32)], max_pixels=64 * 48 - 1))
    assert probe(path, max_pixels=64 * 48).width == 64  # the limit itself is allowed
    assert MAX_PIXELS == 3840 * 2160
    # the decoder itself refuses frames over the limit (a stream whose frames grow later)
    with open_container(path, max_pixels=64 * 48) as container:
        assert container.streams.video[0].codec_context.options == {"max_pixels": "3072"}
