"""Benchmark: a video declaring huge frames (a "video bomb") in ``build videos`` and the app.

Writes a short H.264 file whose frames are ``--side`` x ``--side`` pixels (default 16000:
about 750 KB on disk, 384 MB per decoded frame; writing it takes about 3.3 GB for 20 s, so
``--bomb PATH`` reuses one), then, in child processes:

- ``build videos`` over the demo clips (``demo-videos``) and the bomb (``resnet18@random``
  and ``logmel``, ``--workers 1``): peak memory of the build and of its decoding process,
  wall time; the bomb must be reported as ``frames over the pixel limit``;
- the app (``python -m app --dataset OUT --media DIR --checkpoint RUN``) with the bomb in
  the media folder in place of a clip: ``--clients`` clients search at once (each search
  asks for the bomb's thumbnail) and play the bomb's caption, ``--rounds`` times; peak
  memory of the server process (``VmHWM``) and the slowest search.

Targets: build peak < 1.0 GB, app peak < 1.5 GB, every search answered within 10 s. Prints
one line per measurement with the load average and exits 1 on a miss.

    python benchmarks/bench_video_bomb.py [--side 16000] [--clients 8] [--rounds 3]
        [--bomb PATH] [--keep DIR]
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request
from fractions import Fraction
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT), str(ROOT / "benchmarks")]
from machine import machine_line  # benchmarks/machine.py, beside this script

BUILD_PEAK_GB, APP_PEAK_GB, SEARCH_SECONDS = 1.0, 1.5, 10.0


def write_bomb(path: Path, side: int, frames: int = 10) -> Path:
    """A short H.264 video of ``side`` x ``side`` grey frames."""
    import av
    import numpy as np

    with av.open(str(path), "w") as container:
        stream = container.add_stream("libx264", rate=5)
        stream.width = stream.height = side
        stream.pix_fmt = "yuv420p"
        stream.options = {"preset": "ultrafast", "crf": "40"}
        frame = av.VideoFrame(side, side, "yuv420p")
        for plane in frame.planes:
            np.frombuffer(plane, np.uint8)[:] = 100
        for index in range(frames):
            frame.pts, frame.time_base = index, Fraction(1, 5)
            container.mux(stream.encode(frame))
        container.mux(stream.encode(None))
    return path


def run(args, env, **kwargs) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, *args], env=env, cwd=ROOT, capture_output=True,
                          text=True, check=False, **kwargs)


def load() -> str:
    return "load " + " ".join(f"{x:.1f}" for x in os.getloadavg())


# Runs a command and prints the peak memory of it and its descendants (KB) on the last line
# of stderr: read in a fresh process, since a child's peak starts at its parent's memory
# when it is forked.
PEAK_WRAPPER = ("import resource, subprocess, sys; "
                "done = subprocess.run(sys.argv[1:]); "
                "print(resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss, file=sys.stderr); "
                "sys.exit(done.returncode)")


def run_with_peak(args, env) -> tuple[subprocess.CompletedProcess, float]:
    """``python ARGS`` and the peak memory (GB) of any process it ran."""
    done = run(["-c", PEAK_WRAPPER, sys.executable, *args], env)
    lines = done.stderr.rstrip().splitlines()
    peak = int(lines[-1]) / 2**20 if lines and lines[-1].isdigit() else float("nan")
    return done, peak


def vm_hwm_gb(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) / 2**20
    return float("nan")


def free_port() -> int:
    import socket

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def measure_build(work: Path, bomb: Path, env) -> tuple[bool, Path, Path]:
    demo = work / "demo"
    done = run(["-m", "datasets_scripts", "demo-videos", str(demo)], env)
    if done.returncode:
        sys.exit(f"demo-videos failed:\n{done.stderr}")
    shutil.copy(bomb, demo / "videos" / "bomb.mp4")
    with (demo / "captions.csv").open("a", encoding="utf-8") as captions:
        captions.write("bomb,,,en,a video declaring huge frames\n")
    out = work / "own"
    began = time.perf_counter()
    done, peak = run_with_peak(
        ["-m", "datasets_scripts", "build", "videos", "--src", str(demo / "videos"),
         "--captions", str(demo / "captions.csv"), "--out", str(out), "--expert",
         "object=resnet18@random", "--expert", "audio=logmel", "--fps", "0.5",
         "--workers", "1"], env)
    seconds = time.perf_counter() - began
    refused = "frames over the pixel limit: 1" in done.stderr
    print(f"build videos, 8 clips + a {bomb.stat().st_size / 1e3:.0f} KB bomb: exit "
          f"{done.returncode}, {seconds:.1f} s, peak {peak:.2f} GB (the build or its decoding "
          f"process, whichever is larger), bomb refused: {refused}; {load()}")
    if done.returncode:
        print(done.stderr[-2000:], file=sys.stderr)
    ok = done.returncode == 0 and refused and peak < BUILD_PEAK_GB
    return ok, out, demo


def measure_app(work: Path, out: Path, demo: Path, bomb: Path, clients: int, rounds: int,
                env) -> bool:
    media = work / "media"
    shutil.copytree(demo / "videos", media)
    (media / "bomb.mp4").unlink()
    shutil.copy(bomb, media / "kite.mp4")  # the dataset's kite is now the bomb
    done = run(["-m", "rudder.train", "--dataset", str(out), "--epochs", "1", "--output-dir",
                str(work / "run"), "--set", "data.batch_size=4"], env)
    if done.returncode:
        sys.exit(f"training failed:\n{done.stderr[-2000:]}")
    port = free_port()
    server = subprocess.Popen(
        [sys.executable, "-m", "app", "--dataset", str(out), "--media", str(media),
         "--checkpoint", str(work / "run"), "--port", str(port), "--db",
         str(work / "labels.sqlite")], env=env, cwd=ROOT, stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE, text=True)
    url = f"http://127.0.0.1:{port}/"
    try:
        for _ in range(600):
            try:
                urllib.request.urlopen(url, timeout=2).close()
                break
            except OSError:
                if server.poll() is not None:
                    sys.exit(f"the app stopped:\n{server.stderr.read()[-2000:]}")
                time.sleep(0.5)
        from gradio_client import Client

        times, errors = [], []

        def client():
            try:
                session = Client(url, verbose=False, analytics_enabled=False)
                for _ in range(rounds):
                    began = time.perf_counter()
                    session.predict("making a kite", "en", "en", 16, False, "en",
                                    api_name="/search")
                    times.append(time.perf_counter() - began)
                    session.predict("kite", api_name="/play")
            except Exception as error:  # noqa: BLE001 - reported below
                errors.append(repr(error))

        threads = [threading.Thread(target=client) for _ in range(clients)]
        began = time.perf_counter()
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        wall = time.perf_counter() - began
        time.sleep(2)  # the thumbnail pool's follow-up work, if any
        peak = vm_hwm_gb(server.pid)
    finally:
        server.terminate()
        server.wait(timeout=30)
    slowest = max(times) if times else float("inf")
    print(f"app with the bomb in --media: {clients} clients x {rounds} searches (+ playing the "
          f"bomb) in {wall:.1f} s, slowest search {slowest:.2f} s, median "
          f"{sorted(times)[len(times) // 2] if times else float('nan'):.2f} s, server peak "
          f"{peak:.2f} GB (VmHWM); errors: {errors[:2] or 'none'}; {load()}")
    return not errors and slowest < SEARCH_SECONDS and peak < APP_PEAK_GB


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--side", type=int, default=16000, help="frame width and height")
    parser.add_argument("--clients", type=int, default=8)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--bomb", type=Path, help="reuse this bomb file instead of writing one")
    parser.add_argument("--keep", type=Path, help="work in this folder and keep it")
    parser.add_argument("--write-bomb", type=Path, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.write_bomb:
        write_bomb(args.write_bomb, args.side)
        return 0
    print(machine_line(), flush=True)
    work = args.keep or Path(tempfile.mkdtemp(prefix="rudder-bomb-"))
    work.mkdir(parents=True, exist_ok=True)
    env = {**os.environ, "PYTHONPATH": str(ROOT), "RUDDER_CACHE": str(work / "cache"),
           "GRADIO_ANALYTICS_ENABLED": "False", "HF_HUB_DISABLE_TELEMETRY": "1",
           "HF_HUB_OFFLINE": "1"}
    try:
        bomb = args.bomb
        if bomb is None:  # in a child: writing it takes gigabytes this process should not hold
            bomb = work / "bomb.mp4"
            done = run([str(Path(__file__).resolve()), "--write-bomb", str(bomb), "--side",
                        str(args.side)], env)
            if done.returncode:
                sys.exit(f"writing the bomb failed:\n{done.stderr[-2000:]}")
        print(f"bomb: {bomb.stat().st_size / 1e3:.0f} KB declaring {args.side}x{args.side} "
              f"frames ({args.side * args.side * 1.5 / 2**20:.0f} MB each decoded)")
        build_ok, out, demo = measure_build(work, bomb, env)
        app_ok = measure_app(work, out, demo, bomb, args.clients, args.rounds, env)
    finally:
        if args.keep is None:
            shutil.rmtree(work, ignore_errors=True)
    print(f"targets: build peak < {BUILD_PEAK_GB} GB: {'met' if build_ok else 'MISSED'}; app "
          f"peak < {APP_PEAK_GB} GB and searches < {SEARCH_SECONDS:.0f} s: "
          f"{'met' if app_ok else 'MISSED'}")
    return 0 if build_ok and app_ok else 1


if __name__ == "__main__":
    sys.exit(main())
