"""Decoding in worker processes, overlapped with batched inference in the main process.

A task is one video file and its segments (:class:`Task`). :func:`decode_task` turns it
into messages: ``("info", ...)`` (duration, audio, segments clipped to the video), then
``("frames", stem, group, item, uint8 array)`` chunks of at most :data:`CHUNK` frames and
``("patches", stem, item, float32 array)`` log-mel patches, then ``("done", stem)``; or
``("error", stem, reason, kind)`` (``kind``: :attr:`VideoError.kind`). Workers put
messages on a bounded queue, so at most ``workers + queue size`` chunks exist at once,
whatever the videos' length.

:class:`Extractor` runs every expert of a chunk's group on it as one batch. A chunk holds
frames of one segment of one video, and how a video is cut into chunks depends on the
video alone, so a video's features are the same bytes whichever process, shard or worker
count computed them (on the same device and library versions).
"""

from __future__ import annotations

import multiprocessing
import os
import queue as queue_module
from dataclasses import dataclass
from typing import Any

import numpy as np

from .audio_features import PATCH_HOP, PatchStream
from .video_decode import (
    MAX_PIXELS,
    UNREADABLE,
    VideoError,
    iter_audio,
    iter_frames,
    probe,
    sample_times,
)

CHUNK = 32  # frames per inference batch; a multiple of the 16-frame clips
QUEUE_SIZE = 8


@dataclass
class Task:
    stem: str
    path: str
    items: list  # [(start, end)] with None for the whole video
    groups: list  # [(fps, resize, crop)] frame groups
    audio_rate: int | None  # None: no audio expert
    max_pixels: int = MAX_PIXELS


def _segments(task: Task, duration: float):
    """Each item's ``(start, end)`` clipped to the video, or an error string."""
    out: list[tuple[float, float] | str] = []
    for start, end in task.items:
        if start is None:
            out.append((0.0, duration))
        elif start >= duration:
            out.append(f"starts at {start:g} s, after the video ends ({duration:.2f} s)")
        else:
            out.append((start, min(end, duration)))
    return out


def decode_task(task: Task):
    """The messages of one video (module docstring)."""
    try:
        info = probe(task.path, task.max_pixels)
        segments = _segments(task, info.duration)
        yield ("info", task.stem, {"duration": info.duration, "has_audio": info.has_audio,
                                   "segments": segments})
        ok = [(i, s) for i, s in enumerate(segments) if not isinstance(s, str)]
        targets = [
            ((g, i), sample_times(start, end, fps), resize, crop)
            for g, (fps, resize, crop) in enumerate(task.groups)
            for i, (start, end) in ok
        ]
        if targets:
            for (g, i), frames in iter_frames(task.path, targets, CHUNK,
                                              info.video_duration or info.duration,
                                              task.max_pixels):
                yield ("frames", task.stem, g, i, frames)
        if task.audio_rate and info.has_audio and ok:
            streams = {i: PatchStream() for i, _ in ok}
            pieces = iter_audio(task.path, task.audio_rate, [(i, s, e) for i, (s, e) in ok],
                                block=PATCH_HOP * 8, max_pixels=task.max_pixels)
            for i, samples in pieces:
                out = streams[i].add(samples)
                if len(out):
                    yield ("patches", task.stem, i, out)
            for i, stream in streams.items():
                out = stream.finish()
                if len(out):
                    yield ("patches", task.stem, i, out)
    except VideoError as error:
        yield ("error", task.stem, str(error), error.kind)
        return
    yield ("done", task.stem)


def _worker(tasks, results, parent: int) -> None:
    """Decode tasks until the ``None`` sentinel; exit when the parent is gone (killed with
    SIGKILL, it cannot stop its workers), instead of waiting on a full queue forever."""

    def put(message):
        while True:
            try:
                results.put(message, timeout=1.0)
                return
            except queue_module.Full:
                if os.getppid() != parent:
                    os._exit(0)

    for task in iter(tasks.get, None):
        put(("start", task.stem, os.getpid()))
        for message in decode_task(task):
            put(message)


def run_tasks(tasks: list[Task], workers: int):
    """Yield the messages of every task; ``workers`` processes decode (0: in this process).
    A worker that dies (a crash inside FFmpeg) fails the video it was decoding, naming its
    exit code, and a new worker takes over the rest."""
    if workers <= 0:
        for task in tasks:
            yield from decode_task(task)
        return
    context = multiprocessing.get_context("spawn")
    todo, results = context.Queue(), context.Queue(maxsize=QUEUE_SIZE)
    for task in tasks:
        todo.put(task)

    def start():
        proc = context.Process(target=_worker, args=(todo, results, os.getpid()), daemon=True)
        todo.put(None)
        proc.start()
        return proc

    procs = [start() for _ in range(min(workers, len(tasks)))]
    current: dict[int, str] = {}  # worker pid -> the stem it decodes
    finished: set[str] = set()
    try:
        while len(finished) < len(tasks):
            try:
                message = results.get(timeout=1.0)
            except queue_module.Empty:
                for proc in [p for p in procs if not p.is_alive()]:
                    procs.remove(proc)
                    stem = current.pop(proc.pid, None)
                    if proc.exitcode and stem is not None and stem not in finished:
                        finished.add(stem)
                        yield ("error", stem, f"the decoder crashed (exit code {proc.exitcode})",
                               UNREADABLE)
                    if len(finished) < len(tasks):
                        procs.append(start())
                continue
            if message[0] == "start":
                current[message[2]] = message[1]
                continue
            if message[0] in ("done", "error"):
                finished.add(message[1])
                for pid, stem in list(current.items()):
                    if stem == message[1]:
                        del current[pid]
            yield message
    finally:
        for proc in procs:
            if proc.is_alive():
                proc.terminate()
            proc.join(timeout=5)


class Extractor:
    """Runs the experts on the messages and collects each video's features."""

    def __init__(self, experts):
        self.experts = experts
        self.groups: list[tuple[Any, ...]] = []  # frame groups: (fps, resize, crop)
        self.by_group: dict[Any, Any] = {}
        for expert in experts:
            if expert.arch.kind != "audio" and expert.group[1:] not in self.groups:
                self.groups.append(expert.group[1:])
            self.by_group.setdefault(expert.group, []).append(expert)
        self.audio = [e for e in experts if e.arch.kind == "audio"]
        rates = {e.arch.rate for e in self.audio}
        self.audio_rate = rates.pop() if rates else None
        self.frames_seen = 0

    def task(self, stem, path, items, max_pixels: int = MAX_PIXELS) -> Task:
        return Task(stem, str(path), items, list(self.groups), self.audio_rate, max_pixels)

    def features(self, message, store: dict) -> None:
        """Add a ``frames``/``patches`` message's features to ``store``
        (``{(expert, item): [arrays]}``)."""
        if message[0] == "frames":
            _, _, group, item, frames = message
            self.frames_seen += len(frames)
            frame_group = ("frames", *self.groups[group])
            for expert in self.by_group[frame_group]:
                batch = frames
                if expert.arch.kind == "clip":
                    batch = _clips(frames, expert.arch.clip_frames)
                store.setdefault((expert.spec.name, item), []).append(expert.encode(batch))
        elif message[0] == "patches":
            _, _, item, patches = message
            for expert in self.audio:
                store.setdefault((expert.spec.name, item), []).append(expert.encode(patches))


def _clips(frames: np.ndarray, length: int) -> np.ndarray:
    """``(n, H, W, 3)`` -> ``(ceil(n / length), length, H, W, 3)``: consecutive clips, the
    last padded by repeating its last frame."""
    count = -(-len(frames) // length)
    pad = count * length - len(frames)
    if pad:
        frames = np.concatenate([frames, np.repeat(frames[-1:], pad, axis=0)])
    return frames.reshape(count, length, *frames.shape[1:])
