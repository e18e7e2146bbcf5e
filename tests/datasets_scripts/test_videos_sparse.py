"""Sparse decoding gives the frames dense decoding gives, on several GOP structures,
B-frames, open GOPs, variable frame rates, a container start time > 0 and other codecs
(``datasets_scripts.video_sparse``)."""

from fractions import Fraction

import numpy as np
import pytest

av = pytest.importorskip("av")

from datasets_scripts import video_sparse
from datasets_scripts.video_decode import iter_frames, probe, sample_times

from .video_files import picture, read_index

RATE = 12


def write(path, times, codec="libx264", options=None, pix_fmt="yuv420p"):
    """A 64x48 video whose frame ``i`` (at ``times[i]`` s) shows ``i`` (video_files)."""
    if codec not in av.codecs_available:
        pytest.skip(f"no {codec} encoder in this PyAV")
    with av.open(str(path), "w") as container:
        stream = container.add_stream(codec, rate=RATE)
        stream.width, stream.height, stream.pix_fmt = 64, 48, pix_fmt
        stream.time_base = Fraction(1, 1000)
        stream.codec_context.time_base = Fraction(1, 1000)
        stream.options = options or {}
        for index, time in enumerate(times):
            frame = av.VideoFrame.from_ndarray(picture(index, 64, 48), "rgb24")
            frame.pts, frame.time_base = round(time * 1000), Fraction(1, 1000)
            container.mux(stream.encode(frame))
        container.mux(stream.encode(None))
    return path


def regular(count, start=0.0):
    return [start + i / RATE for i in range(count)]


X264 = {"preset": "fast", "crf": "10"}  # "fast" makes B-frames (b-pyramid: some are references)
FILES = {
    "h264-gop12-bframes.mp4": (regular(120), "libx264", {**X264, "g": "12", "bf": "3"}),
    "h264-one-gop.mp4": (regular(120), "libx264", {**X264, "g": "1000", "sc_threshold": "0"}),
    "h264-gop8-no-bframes.mp4": (regular(120), "libx264", {**X264, "g": "8", "bf": "0"}),
    "h264-open-gop.mkv": (regular(120), "libx264", {**X264, "x264-params":
                          "keyint=12:min-keyint=12:scenecut=0:open-gop=1:bframes=3"}),
    "h264-vfr.mp4": (np.cumsum([0.02, *np.tile([0.05, 0.13, 0.31, 0.07], 25)]).tolist(),
                     "libx264", {**X264, "g": "10"}),
    "h264-starts-at-2.5s.mkv": (regular(96, 2.5), "libx264", {**X264, "g": "12"}),
    "h264-starts-at-2.5s.mp4": (regular(96, 2.5), "libx264", {**X264, "g": "12"}),
    "vp9-gop10.webm": (regular(96), "libvpx-vp9", {"g": "10", "crf": "10", "b:v": "0",
                                                   "deadline": "realtime", "cpu-used": "8"}),
    "mpeg4-bframes.mkv": (regular(96), "mpeg4", {"g": "12", "bf": "2", "qscale": "2"}),
    "mjpeg-intra.mkv": (regular(60), "mjpeg", {}),
}


@pytest.fixture(scope="module")
def files(tmp_path_factory):
    folder = tmp_path_factory.mktemp("sparse")
    made = {}
    for name, (times, codec, options) in FILES.items():
        pix = "yuvj420p" if codec == "mjpeg" else "yuv420p"
        if codec in av.codecs_available:
            made[name] = write(folder / name, times, codec, options, pix)
    return made


def targets_of(path):
    """Sampled times as a build asks for them: two rates over the video and a segment."""
    duration = probe(path).duration
    return [
        ("whole-1fps", sample_times(0.0, duration, 1.0), 48, 32),
        ("whole-0.3fps", sample_times(0.0, duration, 0.3), 48, 32),
        ("segment-2fps", sample_times(duration / 3, duration * 0.8, 2.0), 64, 48),
        ("past-the-end", np.array([duration + 5.0]), 48, 32),
    ]


def decode(path, decoding):
    out = {}
    for key, frames in iter_frames(path, targets_of(path), 8,
                                   decoding=decoding):
        out.setdefault(key, []).append(frames)
    return {key: np.concatenate(chunks) for key, chunks in out.items()}


@pytest.mark.parametrize("name", list(FILES))
def test_sparse_gives_the_dense_frames(files, name, monkeypatch):
    if name not in files:
        pytest.skip("encoder missing")
    path = files[name]
    dense = decode(path, "dense")

    def no_fallback(*args):
        raise AssertionError("the plan did not hold: it fell back to dense decoding")

    monkeypatch.setattr(video_sparse, "_dense_after", no_fallback)
    sparse = decode(path, "sparse")
    assert dense.keys() == sparse.keys()
    for key in dense:
        assert np.array_equal(dense[key], sparse[key]), key
    times = [t for _, ts, _, _ in targets_of(path) for t in ts]
    plan = video_sparse.make_plan(path, sorted(times), _origin(path))
    assert plan is not None
    fed = sum(last - first + 1 for first, last in plan.spans)
    if "one-gop" not in name and "open-gop" not in name:
        assert fed < 0.8 * len(plan.pts)  # whole GOPs and GOP ends were dropped


def _origin(path):
    with av.open(str(path)) as container:
        start = container.start_time
    return start / 1_000_000 if start is not None else 0.0


def test_the_frames_are_the_ones_shown(files):
    """Variable frame rate: frame i shows from its own timestamp on (read from its pixels)."""
    path = files["h264-vfr.mp4"]
    stamps = FILES["h264-vfr.mp4"][0]
    times = sample_times(0.0, probe(path).duration, 1.0)
    chunks = iter_frames(path, [("k", times, 48, 32)], 64, decoding="sparse")
    shown = [read_index(f[:, :4]) for _, frames in chunks for f in frames]
    expected = [max(i for i, s in enumerate(stamps) if s - stamps[0] <= t + 1e-9) % 36
                for t in times]
    assert shown == expected


def test_start_time_is_the_origin(files):
    path = files["h264-starts-at-2.5s.mkv"]
    times = np.array([0.0, 0.5, 1.01, 4.0])
    chunks = iter_frames(path, [("k", times, 48, 32)], 64, decoding="sparse")
    shown = [read_index(f[:, :4]) for _, frames in chunks for f in frames]
    assert shown == [0, 6, 12, 48 % 36]


def test_a_broken_plan_falls_back_to_the_dense_frames(files, monkeypatch):
    """A decoder that does not give what the plan expects: the frames after the last one
    given are decoded densely, so the result is still the dense one."""
    path = files["h264-gop12-bframes.mp4"]
    dense = decode(path, "dense")
    planned = video_sparse._planned

    def stops_early(container, stream, plan):
        for count, frame in enumerate(planned(container, stream, plan)):
            if count == 3:
                raise video_sparse._Mismatch
            yield frame

    monkeypatch.setattr(video_sparse, "_planned", stops_early)
    sparse = decode(path, "sparse")
    for key in dense:
        assert np.array_equal(dense[key], sparse[key]), key


def test_the_rule_picks_dense_for_dense_sampling(files, monkeypatch):
    path = files["h264-gop12-bframes.mp4"]
    calls = []
    monkeypatch.setattr(video_sparse, "make_plan", lambda *a: calls.append(a))
    duration = probe(path).duration
    list(iter_frames(path, [("k", sample_times(0.0, duration, 8.0), 48, 32)]))
    assert calls == []  # 80 of 120 frames: dense, no plan
    list(iter_frames(path, [("k", sample_times(0.0, duration, 1.0), 48, 32)]))
    assert len(calls) == 1  # 10 of 120: sparse


def test_unplannable_files_are_decoded_densely(tmp_path):
    """Two frames with one timestamp (a broken file): no plan, the dense frames."""
    path = write(tmp_path / "dup.mkv", [0.0, 0.1, 0.1, 0.3, 0.4, 0.5], options={**X264,
                                                                            "bf": "0"})
    times = [0.05, 0.35]
    assert video_sparse.make_plan(path, times, 0.0) is None
    dense = list(iter_frames(path, [("k", np.array(times), 48, 32)], decoding="dense"))
    sparse = list(iter_frames(path, [("k", np.array(times), 48, 32)], decoding="sparse"))
    assert np.array_equal(dense[0][1], sparse[0][1])


def test_unknown_decoding_is_refused(files):
    with pytest.raises(ValueError, match="decoding 'fast'"):
        list(iter_frames(files["mjpeg-intra.mkv"], [("k", np.array([0.5]), 48, 32)],
                         decoding="fast"))


def test_a_kept_scaler_gives_the_pixels_of_a_fresh_one(files):
    """iter_frames keeps one scaler per frame size across frames: the same arrays as a
    scaler set up for each frame, including when two sizes alternate."""
    from av.video.reformatter import VideoReformatter

    from datasets_scripts.video_decode import _upright_crop

    with av.open(str(files["h264-vfr.mp4"])) as container:
        frames = [f for _, f in zip(range(12), container.decode(video=0), strict=False)]
    kept = VideoReformatter()
    for k, frame in enumerate(frames):
        size = (48, 32) if k % 2 else (64, 48)
        fresh = frame.to_ndarray(width=size[0] * 4 // 3, height=size[0], format="rgb24",
                                 interpolation="BILINEAR")
        top, left = (fresh.shape[0] - size[1]) // 2, (fresh.shape[1] - size[1]) // 2
        expected = fresh[top : top + size[1], left : left + size[1]]
        assert np.array_equal(_upright_crop(frame, *size, kept), expected)
