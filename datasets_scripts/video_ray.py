"""``build videos --engine ray``: the extraction of :func:`datasets_scripts.videos.extract`
on a Ray cluster, with Ray Data.

- **Decoding**: one Ray task per file on CPU workers runs
  :func:`datasets_scripts.video_pipeline.decode_task`, the one-machine path's decoder; its
  messages (frame chunks, audio patches) stream on as they come.
- **Inference**: an actor pool runs the experts on each chunk, one batch per chunk as the
  one-machine path does, so a video's features are the same bytes (on the same device and
  library versions): one actor per GPU where the cluster has GPUs (``--device auto|cuda``),
  else CPU actors. The experts are loaded once by the driver and shipped to the actors, so
  every actor runs the same weights.
- **Backpressure**: Ray Data's streaming executor bounds what is in flight between the
  stages (each operator's queue has an object-store budget): decoding pauses while the model
  stage is behind, so memory stays bounded whatever the number of videos.
- **Parts**: the driver (this process) collects each file's features and writes its part
  (:func:`datasets_scripts.videos.write_part`) as soon as the file is done, so ``--shard``,
  resuming and merging the parts into the dataset are the one-machine path's.

``ray.init()`` connects to the cluster named by ``RAY_ADDRESS`` (or one started on this
node with ``ray start``), else starts Ray on this machine. The video files and the parts
folder must be at the same path on every node (a shared file system); this package's code
travels with the job (``runtime_env`` ``py_modules``), its dependencies (torch, PyAV) must be
installed on the workers.
"""

from __future__ import annotations

import dataclasses
import io
import json
import logging
import sys
import time
from collections import defaultdict
from pathlib import Path
from typing import Any

import numpy as np

from rudder.optional import require

from .build_report import BuildError

CPU_ACTORS_PER_CPUS = 4  # CPU clusters: up to one model actor per 4 CPUs (the rest decode)


def _pack(array: np.ndarray) -> bytes:
    buffer = io.BytesIO()
    np.save(buffer, array, allow_pickle=False)
    return buffer.getvalue()


def _unpack(data: bytes) -> np.ndarray:
    return np.load(io.BytesIO(data), allow_pickle=False)


def _row(stem: str, seq: int, kind: str, key: str = "", data: bytes = b"", info: str = ""):
    return {"stem": stem, "seq": seq, "kind": kind, "key": key, "data": data, "info": info}


def decode_rows(row: dict):
    """Ray Data ``flat_map``: one task (a JSON :class:`~.video_pipeline.Task`) -> its
    messages as rows, numbered in order (``seq``)."""
    from .video_pipeline import Task, decode_task

    task = Task(**json.loads(row["task"]))
    for seq, message in enumerate(decode_task(task)):
        kind, stem = message[0], message[1]
        if kind == "info":
            yield _row(stem, seq, kind, info=json.dumps(message[2]))
        elif kind == "frames":
            _, _, group, item, frames = message
            yield _row(stem, seq, kind, key=f"{group}|{item}", data=_pack(frames))
        elif kind == "patches":
            _, _, item, patches = message
            yield _row(stem, seq, kind, key=str(item), data=_pack(patches))
        elif kind == "error":  # the reason and its kind (VideoError.kind)
            yield _row(stem, seq, kind, info=json.dumps([message[2], message[3]]))
        else:
            yield _row(stem, seq, kind)


class Encoder:
    """Ray Data actor: the experts on each row's frames or patches, one row out per row in
    (same ``stem`` and ``seq``): ``features`` rows hold an ``.npz`` of ``expert|item``
    arrays and, for frames, the frame count in ``info``; other rows pass through."""

    def __init__(self, experts, device: str):
        from .video_pipeline import Extractor

        for expert in experts:
            expert.device = device
            if expert.model is not None:
                expert.model = expert.model.to(device)
        self.extractor = Extractor(experts)

    def __call__(self, batch: dict) -> dict:
        rows = []
        for k in range(len(batch["stem"])):
            stem, seq, kind = str(batch["stem"][k]), int(batch["seq"][k]), str(batch["kind"][k])
            message: tuple  # ("frames", stem, group, item, frames) or ("patches", stem, item, x)
            if kind == "frames":
                group, item = map(int, str(batch["key"][k]).split("|"))
                message = ("frames", stem, group, item, _unpack(batch["data"][k]))
            elif kind == "patches":
                message = ("patches", stem, int(batch["key"][k]), _unpack(batch["data"][k]))
            else:
                rows.append(_row(stem, seq, kind, info=str(batch["info"][k])))
                continue
            store: dict = {}
            self.extractor.features(message, store)
            buffer = io.BytesIO()
            arrays = {f"{e}|{i}": np.concatenate(p) for (e, i), p in store.items()}
            np.savez(buffer, allow_pickle=False, **arrays)
            count = str(len(message[-1])) if kind == "frames" else ""
            rows.append(_row(stem, seq, "features", data=buffer.getvalue(), info=count))
        out = {name: np.array([r[name] for r in rows], dtype=object)
               for name in ("stem", "kind", "key", "data", "info")}
        out["seq"] = np.array([r["seq"] for r in rows], dtype=np.int64)
        return out


def _start_ray(ray) -> bool:
    """Connect to (or start) Ray, shipping this package's code with the job; True when this
    call did (a caller that started Ray itself ships the code its own way)."""
    import rudder

    if ray.is_initialized():
        return False
    code = [str(Path(__file__).resolve().parent), str(Path(rudder.__file__).resolve().parent)]
    ray.init(runtime_env={"py_modules": code}, logging_level="warning", log_to_driver=False,
             include_dashboard=False)
    return True


def _model_stage(ray, device: str) -> tuple[str, dict]:
    """The experts' device on this cluster and the model stage's ``map_batches`` options:
    one actor per GPU, else an autoscaling pool of CPU actors."""
    resources = ray.cluster_resources()
    gpus = int(resources.get("GPU", 0))
    if device == "cuda" and not gpus:
        raise BuildError("--device cuda: the Ray cluster has no GPU (use --device cpu)")
    if gpus and device != "cpu":
        return "cuda", {"compute": ray.data.ActorPoolStrategy(size=gpus), "num_gpus": 1}
    most = max(1, int(resources.get("CPU", 1)) // CPU_ACTORS_PER_CPUS)
    return "cpu", {"compute": ray.data.ActorPoolStrategy(min_size=1, max_size=most),
                   "num_cpus": 1}


def extract_ray(videos, todo, experts, write, device: str, workers: int | None,
                progress: bool = True, max_pixels: int | None = None) -> dict:
    """Decode and encode the ``todo`` files on Ray, calling ``write(stem, info, error,
    store, error_kind)`` as each is done (the part's contents, as :func:`~.videos.extract`
    writes them); returns the timings ``extract`` returns. ``workers``: at most this many
    decoding tasks at once (None or 0: as many as the cluster runs); ``max_pixels``: the
    frame-size limit of :func:`~.video_decode.open_container` (None: its default)."""
    ray = require("ray", "ray", "--engine ray")
    require("ray.data", "ray", "--engine ray")

    from .video_pipeline import Extractor

    extractor = Extractor(experts)
    limit = {} if max_pixels is None else {"max_pixels": max_pixels}
    tasks = [dataclasses.asdict(extractor.task(s, Path(videos[s].path).resolve(),
                                               [(i.start, i.end) for i in videos[s].items],
                                               **limit))
             for s in todo]
    stats = {"seconds": 0.0, "frames": 0}
    if not tasks:
        return stats
    started = _start_ray(ray)
    try:
        model_device, model_options = _model_stage(ray, device)
        ray.data.DataContext.get_current().enable_progress_bars = False  # ours counts files
        logging.getLogger("ray.data").setLevel(logging.WARNING)
        dataset = (
            ray.data.from_items([{"task": json.dumps(t)} for t in tasks],
                                override_num_blocks=len(tasks))
            .flat_map(decode_rows, num_cpus=1,
                      compute=ray.data.TaskPoolStrategy(size=workers or None))
            .map_batches(Encoder, batch_size=1, fn_constructor_kwargs={
                "experts": experts, "device": model_device}, **model_options)
        )
        try:
            stats = _collect(dataset, write, len(tasks), progress)
        except ray.exceptions.RayError as error:  # a worker lost, a task failed past retries
            first = str(error).strip().splitlines()[0] if str(error).strip() else ""
            raise BuildError(f"the Ray job failed ({type(error).__name__}: {first}); the "
                             "files done so far are kept: rerun to resume") from None
    finally:
        if started:
            ray.shutdown()
    return stats


def _collect(dataset, write, total: int, progress: bool) -> dict:
    """Write each file's part once all its rows are in (rows of different files, and of
    one file on several actors, come in any order): ``info``, the features in ``seq``
    order, then ``done`` or ``error``."""
    from tqdm import tqdm

    pending: defaultdict[Any, dict] = defaultdict(dict)
    last: dict[Any, Any] = {}
    bar = tqdm(total=total, unit="file", file=sys.stderr, disable=not progress,
               dynamic_ncols=True, mininterval=0.5 if sys.stderr.isatty() else 30)
    began, frames = time.perf_counter(), 0
    try:
        for row in dataset.iter_rows():
            stem = row["stem"]
            pending[stem][int(row["seq"])] = row
            if row["kind"] in ("done", "error"):
                last[stem] = int(row["seq"])
            if stem not in last or len(pending[stem]) <= last[stem]:
                continue
            rows = [pending[stem][seq] for seq in range(last.pop(stem) + 1)]
            del pending[stem]
            info = next((json.loads(r["info"]) for r in rows if r["kind"] == "info"), None)
            error, error_kind = (json.loads(rows[-1]["info"]) if rows[-1]["kind"] == "error"
                                 else (None, None))
            store: dict = {}
            for r in rows:
                if r["kind"] != "features":
                    continue
                frames += int(r["info"] or 0)
                with np.load(io.BytesIO(r["data"]), allow_pickle=False) as arrays:
                    for key in arrays.files:
                        expert, item = key.rsplit("|", 1)
                        store.setdefault((expert, int(item)), []).append(arrays[key])
            write(stem, info, error, {} if error else store, error_kind)
            bar.update(1)
            bar.set_postfix_str(f"{frames / max(time.perf_counter() - began, 1e-9):.1f} frames/s")
    finally:
        bar.close()
    return {"seconds": time.perf_counter() - began, "frames": frames}
