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
runs once. Prints one line per measurement and exits 1 on a miss.

    python benchmarks/bench_extract.py [--videos 4] [--seconds 6] [--fps 4] [--rounds 3]
        [--expert object=resnet18@random] [--workers 1] [--device auto]
"""

from __future__ import annotations

import argparse
import os
import shutil
import sys
import tempfile
import time
from fractions import Fraction
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

E2E_OVER_SUM = 1.25  # CPU: end-to-end wall <= 1.25 x (decode + model)
GPU_SHARE_OF_SLOWER = 0.8  # GPU: end-to-end frames/s >= 0.8 x the slower stage's
OVER_LOOP = 2.0  # end to end >= 2x the straightforward loop


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
    args = parser.parse_args(argv)

    import torch

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
    finally:
        shutil.rmtree(tmp, ignore_errors=True)

    load = os.getloadavg()[0]
    print(f"machine: {device}, {torch.get_num_threads()} torch threads, {os.cpu_count()} cores, "
          f"load {load:.2f}; {args.videos} videos x {args.seconds:g} s 320x240 H.264, "
          f"{frames} frames at {args.fps:g} fps, expert {args.expert}, workers {args.workers}")
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
    ok = True
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
