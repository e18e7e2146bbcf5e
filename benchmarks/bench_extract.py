"""Benchmark: feature extraction of ``build videos``, frames per second end to end.

Measured on the same machine, in this order, on generated H.264 videos (moving shapes):

- (a) decoding alone: every video's frames at the image experts' times, decoded, scaled
  and cropped (``decode_task``, one process, no model);
- (b) the model alone on the frames of (a), pre-decoded, in the pipeline's batches;
- end to end: ``extract`` with ``--workers`` decoding processes overlapped with batched
  inference (what ``build videos`` runs);
- a straightforward loop in one process: decode a video's frames at the sampled times,
  then encode them one at a time.

Targets: on the CPU, where decoding and the model compete for the same cores,
end-to-end wall time <= 1.25 x ((a) + (b)); on a GPU, end-to-end frames/s >= 80% of the
slower of (a) and (b); everywhere >= 2x the straightforward loop. The loop's features must
match the pipeline's (else exit 3). (a), (b) and end to end run in ``--rounds`` interleaved
rounds and the best of each counts (the machine's load hits every side alike); the loop
runs once. The thread settings are printed with the figures: torch's intra-op threads (set
with ``--threads``; the loop, which encodes one frame at a time, gains the most from them)
and PyAV's decoder threads (``thread_type`` AUTO: FFmpeg's frame threads, as many as it
picks for the cores).

Sparse decoding (:mod:`datasets_scripts.video_sparse`), on ``--long-seconds`` (300) long,
30 fps, 320x240 H.264 files of several GOP structures, sampled at ``--long-fps`` (1) and
scaled and cropped as resnet's frames: the frames the image experts need, decoded densely
(every frame) and sparsely, best of ``--rounds``; the frames must be the same (else exit 3).
Target: sparse >= 3x dense on the file with a keyframe every 0.5 s. Where the keyframes
are further apart than the samples, every reference frame before each sample must still be
decoded, so the ratio is printed with the share of packets decoded, without a target.

Memory: ``--memory-videos`` (200) decodes of short files in one process (sparse, as
``build videos`` runs them); target: resident memory after the last within 5% of its value
after the first 10.

    python benchmarks/bench_extract.py [--videos 4] [--seconds 6] [--fps 4] [--rounds 3]
        [--expert object=resnet18@random] [--workers 1] [--device auto] [--threads N]
        [--long-seconds 300] [--long-fps 1] [--memory-videos 200]
"""

from __future__ import annotations

import argparse
import shutil
import sys
import tempfile
import time
from fractions import Fraction
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parent))
from machine import machine_line  # benchmarks/machine.py, beside this script

E2E_OVER_SUM = 1.25  # CPU: end-to-end wall <= 1.25 x (decode + model)
GPU_SHARE_OF_SLOWER = 0.8  # GPU: end-to-end frames/s >= 0.8 x the slower stage's
OVER_LOOP = 2.0  # end to end >= 2x the straightforward loop
SPARSE_OVER_DENSE = 3.0  # sparse decoding >= 3x dense on the 0.5-s GOP file
RSS_GROWTH = 0.05  # resident memory over the memory run grows < 5%
LONG_FILES = {  # name -> x264 options; the target applies to the first
    "keyframe every 0.5 s, B-frames": {"g": "15"},
    "keyframe every 1 s, B-frames": {"g": "30"},
    "keyframe every 1 s, no B-frames": {"g": "30", "bf": "0"},
    "keyframe every 2 s, B-frames": {"g": "60"},
    "x264's default (keyframe every 8.3 s), B-frames": {},
}


def write_videos(folder: Path, count: int, seconds: float, size=(320, 240), rate=25) -> list:
    import av

    paths = []
    width, height = size
    for k in range(count):
        path = folder / f"v{k:03d}.mp4"
        with av.open(str(path), "w") as container:
            stream = container.add_stream("libx264", rate=rate)
            stream.width, stream.height, stream.pix_fmt = width, height, "yuv420p"
            stream.options = {"preset": "veryfast", "crf": "23"}
            yy, xx = np.mgrid[0:height, 0:width]
            for i in range(int(seconds * rate)):
                image = np.zeros((height, width, 3), np.uint8)
                image[..., 0] = (xx + 3 * i + 40 * k) % 256
                image[..., 1] = (yy + 2 * i) % 256
                cx, cy = (5 * i) % width, (3 * i + 20 * k) % height
                image[(abs(xx - cx) < 20) & (abs(yy - cy) < 20)] = 255
                frame = av.VideoFrame.from_ndarray(image, "rgb24")
                frame.pts, frame.time_base = i, Fraction(1, rate)
                container.mux(stream.encode(frame))
            container.mux(stream.encode(None))
        paths.append(path)
    return paths


def write_long_video(path: Path, seconds: float, options: dict, rate: int = 30,
                     size=(320, 240)) -> Path:
    """A textured background scrolling under a moving square, H.264 (x264 superfast)."""
    import av

    width, height = size
    yy, xx = np.mgrid[0:height, 0:width]
    base = np.stack([(xx * 2) % 256, (yy * 3) % 256, (xx + yy) % 256], -1).astype(np.uint8)
    with av.open(str(path), "w") as container:
        stream = container.add_stream("libx264", rate=rate)
        stream.width, stream.height, stream.pix_fmt = width, height, "yuv420p"
        stream.options = {"preset": "superfast", "crf": "23", **options}
        for i in range(int(seconds * rate)):
            image = np.roll(base, (2 * i, 3 * i), axis=(0, 1))
            x, y = (5 * i) % (width - 40), (3 * i) % (height - 40)
            image[y : y + 40, x : x + 40] = 255
            frame = av.VideoFrame.from_ndarray(image, "rgb24")
            frame.pts, frame.time_base = i, Fraction(1, rate)
            container.mux(stream.encode(frame))
        container.mux(stream.encode(None))
    return path


def sampled_frames(path: Path, fps: float, decoding: str) -> tuple[np.ndarray, float]:
    """The frames an image expert at ``fps`` needs (256 shorter side, 224 crop), and the
    seconds it took to decode them."""
    from datasets_scripts.video_decode import iter_frames, probe, sample_times

    info = probe(path)
    began = time.perf_counter()
    chunks = [frames for _, frames in iter_frames(
        path, [("k", sample_times(0.0, info.duration, fps), 256, 224)], 32,
        info.video_duration or info.duration, decoding=decoding)]
    return np.concatenate(chunks), time.perf_counter() - began


def packets_share(path: Path, fps: float) -> float:
    """The share of the file's packets inside sparse decoding's spans."""
    from datasets_scripts.video_decode import probe, sample_times
    from datasets_scripts.video_sparse import make_plan

    plan = make_plan(path, sample_times(0.0, probe(path).duration, fps), 0.0)
    return sum(last - first + 1 for first, last in plan.spans) / len(plan.pts)


def sparse_section(tmp: Path, seconds: float, fps: float, rounds: int) -> int:
    """Dense against sparse decoding on the long files: 0 met, 1 missed, 3 frames differ."""
    print(f"sparse decoding: {seconds:g} s, 30 fps, 320x240 H.264 (x264 superfast) at "
          f"--fps {fps:g}, frames scaled to 256 and cropped to 224; PyAV threads AUTO; best "
          f"of {rounds}")
    print(f"  {'GOP structure':48s} {'dense':>8s} {'sparse':>8s} {'ratio':>6s}  packets decoded")
    code, first = 0, None
    for k, (name, options) in enumerate(LONG_FILES.items()):
        path = write_long_video(tmp / f"long{k}.mp4", seconds, options)
        dense_s = sparse_s = float("inf")
        for _ in range(rounds):  # interleaved: the load hits both alike
            dense, took = sampled_frames(path, fps, "dense")
            dense_s = min(dense_s, took)
            sparse, took = sampled_frames(path, fps, "auto")
            sparse_s = min(sparse_s, took)
            if not np.array_equal(dense, sparse):
                print(f"bench_extract: FAILED ({name}: sparse decoding gave other frames)")
                return 3
        ratio = dense_s / sparse_s
        first = ratio if first is None else first
        print(f"  {name:48s} {dense_s:7.2f}s {sparse_s:7.2f}s {ratio:5.2f}x  "
              f"{packets_share(path, fps):6.1%}")
        path.unlink()
    met = first >= SPARSE_OVER_DENSE
    print(f"target: sparse {first:.2f}x dense on the first file >= {SPARSE_OVER_DENSE}x: "
          f"{'met' if met else 'MISSED'}")
    return code if met else 1


def resident_mb() -> float:
    """This process's resident memory (VmRSS), in MB."""
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return float("nan")


def memory_section(tmp: Path, count: int) -> bool:
    """Resident memory over ``count`` decodes (``decode_task``, sparse where the rule picks
    it) of eight 10-s files of several GOP structures, taken in turn."""
    from datasets_scripts.video_pipeline import Task, decode_task

    files = [write_long_video(tmp / f"short{k}.mp4", 10.0, options)
             for k, options in enumerate([*LONG_FILES.values()] * 2)][:8]
    groups = [(1.0, 256, 224)]
    after_warmup = None
    for k in range(count):
        task = Task(f"v{k}", str(files[k % len(files)]), [(None, None)], groups, None)
        for message in decode_task(task):
            if message[0] == "error":
                print(f"bench_extract: FAILED ({message[2]})")
                return False
        if k == min(9, count - 1):
            after_warmup = resident_mb()
    last = resident_mb()
    growth = last / after_warmup - 1
    met = growth < RSS_GROWTH
    print(f"memory: {count} decodes in one process: resident {after_warmup:.1f} MB after 10, "
          f"{last:.1f} MB after {count} ({growth:+.1%}); target < {RSS_GROWTH:.0%}: "
          f"{'met' if met else 'MISSED'}")
    return met


def naive_loop(paths, expert, fps: float):
    """Decode each video's frames at the sampled times (scaled and cropped as the pipeline
    does), keep them all, then encode them one at a time."""
    import av

    from datasets_scripts.video_decode import _upright_crop, sample_times

    features, frames_done = [], 0
    size = (expert.arch.resize, expert.arch.crop)
    for path in paths:
        with av.open(str(path)) as container:
            duration = container.duration / 1_000_000
            wanted = list(sample_times(0.0, duration, fps))
            frames, previous = [], None
            for frame in container.decode(video=0):
                while wanted and wanted[0] < frame.time:
                    frames.append(_upright_crop(frame if previous is None else previous, *size))
                    wanted.pop(0)
                previous = frame
            frames += [_upright_crop(previous, *size)] * len(wanted)
        features.append(np.concatenate([expert.encode(image[None]) for image in frames]))
        frames_done += len(frames)
    return features, frames_done


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--videos", type=int, default=4)
    parser.add_argument("--seconds", type=float, default=6.0)
    parser.add_argument("--fps", type=float, default=4.0)
    parser.add_argument("--expert", default="object=resnet18@random")
    parser.add_argument("--workers", type=int, default=1)
    parser.add_argument("--device", choices=("auto", "cpu", "cuda"), default="auto")
    parser.add_argument("--rounds", type=int, default=3, help="rounds of (a), (b), end to end")
    parser.add_argument("--threads", type=int, default=None,
                        help="torch intra-op threads (default: torch's own)")
    parser.add_argument("--long-seconds", type=float, default=300.0,
                        help="length of the sparse-decoding files (0: skip that section)")
    parser.add_argument("--long-fps", type=float, default=1.0)
    parser.add_argument("--memory-videos", type=int, default=200,
                        help="decodes in the memory run (0: skip it)")
    args = parser.parse_args(argv)

    import torch

    if args.threads:
        torch.set_num_threads(args.threads)

    from datasets_scripts.video_experts import load_expert, parse_spec
    from datasets_scripts.video_pipeline import Extractor, decode_task
    from datasets_scripts.videos import Item, Video, _part_path, extract, read_part

    device = "cuda" if args.device == "auto" and torch.cuda.is_available() else (
        "cpu" if args.device == "auto" else args.device)
    expert = load_expert(parse_spec(args.expert), args.fps, device)
    if expert.arch.kind != "image":
        print("bench_extract: use an image expert (--expert NAME=resnet18@random)")
        return 2
    tmp = Path(tempfile.mkdtemp(prefix="rudder-extract-"))
    try:
        paths = write_videos(tmp, args.videos, args.seconds)
        videos = {p.stem: Video(p.stem, p, [Item(p.stem, None, None, [])]) for p in paths}
        extractor = Extractor([expert])
        tasks = [extractor.task(s, v.path, [(None, None)]) for s, v in videos.items()]
        if device == "cuda":  # warm-up: cuDNN's algorithm choice is not part of the figures
            expert.encode(np.zeros((32, 224, 224, 3), np.uint8))
            torch.cuda.synchronize()

        decode_s = model_s = e2e_s = float("inf")
        for round_ in range(args.rounds):  # interleaved rounds, best of each: load hits all
            began = time.perf_counter()
            messages = [m for task in tasks for m in decode_task(task)]
            decode_s = min(decode_s, time.perf_counter() - began)
            frames = sum(len(m[4]) for m in messages if m[0] == "frames")

            began = time.perf_counter()
            for message in messages:
                extractor.features(message, {})
            if device == "cuda":
                torch.cuda.synchronize()
            model_s = min(model_s, time.perf_counter() - began)
            del messages

            work = tmp / f"parts{round_}"
            work.mkdir()
            timing = extract(videos, list(videos), [expert], work, args.workers, progress=False)
            e2e_s = min(e2e_s, timing["seconds"])
        pipeline = [read_part(_part_path(work, s))[1][f"{expert.spec.name}|0"] for s in videos]

        began = time.perf_counter()
        loop_features, loop_frames = naive_loop(paths, expert, args.fps)
        loop_s = time.perf_counter() - began
        print(machine_line())
        print(f"device {device}, {torch.get_num_threads()} torch threads (the model and the "
              "loop), PyAV decoder threads AUTO; "
              f"{args.videos} videos x {args.seconds:g} s 320x240 H.264, {frames} frames at "
              f"{args.fps:g} fps, expert {args.expert}, workers {args.workers}")
        rows = [("(a) decoding alone", decode_s), ("(b) model alone", model_s),
                ("end to end", e2e_s), ("straightforward loop", loop_s)]
        for name, seconds in rows:
            print(f"{name:22s} {seconds:8.2f} s  {frames / seconds:8.1f} frames/s")
        if loop_frames != frames or any(
            a.shape != b.shape or not np.allclose(a, b, atol=1e-3, rtol=1e-3)
            for a, b in zip(pipeline, loop_features, strict=False)
        ):
            print("bench_extract: FAILED (the loop's features differ from the pipeline's)")
            return 3
        sparse_code, memory_ok = 0, True
        if args.long_seconds > 0:
            sparse_code = sparse_section(tmp, args.long_seconds, args.long_fps, args.rounds)
            if sparse_code == 3:
                return 3
        if args.memory_videos > 0:
            memory_ok = memory_section(tmp, args.memory_videos)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)

    ok = sparse_code == 0 and memory_ok
    if device == "cpu":
        limit = E2E_OVER_SUM * (decode_s + model_s)
        print(f"target: end to end {e2e_s:.2f} s <= {E2E_OVER_SUM} x (a + b) = {limit:.2f} s: "
              f"{'met' if e2e_s <= limit else 'MISSED'}")
        ok &= e2e_s <= limit
    else:
        slower = min(frames / decode_s, frames / model_s)
        met = frames / e2e_s >= GPU_SHARE_OF_SLOWER * slower
        print(f"target: end to end {frames / e2e_s:.1f} frames/s >= {GPU_SHARE_OF_SLOWER} x "
              f"{slower:.1f}: {'met' if met else 'MISSED'}")
        ok &= met
    speedup = loop_s / e2e_s
    print(f"target: end to end {speedup:.2f}x the loop >= {OVER_LOOP}x: "
          f"{'met' if speedup >= OVER_LOOP else 'MISSED'}")
    ok &= speedup >= OVER_LOOP
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
