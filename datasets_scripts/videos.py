"""Your own videos: a folder of video files and a captions file -> features and a dataset.

``python -m datasets_scripts build videos --src VIDEO_DIR --captions CAPTIONS.csv --out OUT
[--expert NAME=SPEC ...] [--fps F] [--device auto|cpu|cuda] [--shard K/N] [--engine local|ray]``

- ``--captions``: CSV (or ``.jsonl``) rows ``video_id,start,end,lang,text[,split]``
  (:mod:`datasets_scripts.captions_table`); ``video_id`` is a file name in ``--src``
  without its extension.
- Items: captions without times describe the whole video, whose id is the file's stem;
  captions with times describe a segment, which becomes its own video
  ``<stem>_<start>_<end>`` (two decimals, as the Charades-STA clips protocol), its
  features computed from that segment's frames and audio only. Captions keep their times
  in the source file (``0``..duration for whole videos); ``rudder.json``'s
  ``extra.media`` maps every video id to ``{"file", "start", "end"}`` in ``--src``.
- Splits: a row's ``split``, else a deterministic one by source file (all segments of a
  file share it): files sorted by the SHA-256 of their stem, the first
  ``--validation-fraction`` validation, the next ``--test-fraction`` test (at least one
  each from three files up), the rest train.
- Experts: ``--expert NAME=SPEC`` (:mod:`datasets_scripts.video_experts`; default
  ``object=resnet50@hub motion=r2plus1d_18@hub audio=logmel``). Image experts see frames
  at ``--fps`` (default 1) and give one vector per frame; ``r2plus1d_18`` one per 16-frame
  clip at 15 fps; audio experts one per 0.96 s. All are variable-length experts. A file
  without an audio track has no audio features (the expert is missing for it).
- Unreadable, corrupt, truncated or empty files, and files whose frames have more than
  ``--max-pixels`` pixels (default 3840x2160, checked from the stream's header before any
  frame is decoded), are reported by name with the reason and skipped; their captions are
  listed as dropped (``extra.dropped_captions``). The console shows the counts per reason
  with the first 20 of each; ``OUT/build_report.txt`` lists every problem and every
  dropped caption.
- Resumable and shardable: each file's features go to ``OUT.parts/<stem>.npz`` (atomically)
  as soon as it is done; a rerun skips the files already done. ``--shard K/N`` (or
  ``RANK``/``WORLD_SIZE`` under torchrun) takes every N-th file from the K-th; when every
  file's part exists the run that finds it so writes ``OUT`` (same bytes whichever shards
  computed the parts). A parts folder made with other experts or weights is refused.
- Engines: ``--engine local`` decodes in processes of this machine; ``--engine ray`` on a
  Ray cluster (:mod:`datasets_scripts.video_ray`), writing the same parts.
"""

from __future__ import annotations

import dataclasses
import hashlib
import io
import json
import os
import shutil
import sys
import time
import zipfile
from collections import defaultdict
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa

from rudder.atomic import LOCK_NAME, atomic_write_text, dataset_lock, replacing
from rudder.cli import float_in, folder, int_in
from rudder.data.layout import SPLITS, DatasetMeta, ExpertInfo, LayoutError
from rudder.data.layout_writer import DatasetWriter
from rudder.languages import SUPPORTED

from .build import LIST_TYPE, CaptionRows
from .build_report import BuildError, NothingToBuild, Reporter, line_ranges
from .captions_table import read_captions
from .cards import fields_section, make_card, recorded_command
from .video_decode import MAX_PIXELS, TOO_LARGE, UNREADABLE, VIDEO_SUFFIXES

SRC_HELP = "folder of the video files (<video_id>.mp4, .webm, .mkv, ...)"
PARTS_VERSION = 1
NOT_RECORDED = ("--shard", "--workers", "--work", "--overwrite", "--device", "--engine")
REPORT_NAME = "build_report.txt"  # every problem and dropped caption, in the output folder
EXAMPLES = 20  # problems of each kind the console shows


def add_arguments(parser) -> None:
    parser.add_argument("--captions", type=Path, required=True,
                        help="CSV/JSONL rows video_id,start,end,lang,text[,split]")
    parser.add_argument("--expert", action="append", default=None, metavar="NAME=SPEC",
                        help="an expert: NAME=ARCH[@hub|@random|@/path/weights], e.g. "
                        "object=resnet50@hub, audio=logmel (default: object=resnet50@hub "
                        "motion=r2plus1d_18@hub audio=logmel)")
    parser.add_argument("--fps", type=float_in(0, 240, low_open=True), default=1.0,
                        help="frames per second for the image experts (default 1)")
    parser.add_argument("--device", choices=("auto", "cpu", "cuda"), default="auto",
                        help="where the experts run (default: cuda when available)")
    parser.add_argument("--shard", default=None, metavar="K/N",
                        help="this process's share of the files: every N-th from the K-th "
                        "(default: RANK/WORLD_SIZE when set, else all)")
    parser.add_argument("--workers", type=int_in(0, 64), default=None,
                        help="decoding processes (default: CPU cores - 1, at most 4; "
                        "0 decodes in the main process); with --engine ray, decoding tasks "
                        "at once (default: as many as the cluster runs)")
    parser.add_argument("--engine", choices=("local", "ray"), default="local",
                        help="local: decoding processes on this machine (default); ray: a "
                        "Ray cluster (Ray Data), see datasets_scripts/video_ray.py; needs the "
                        "ray extra")
    parser.add_argument("--work", type=folder, default=None,
                        help="folder of the per-file parts (default: OUT.parts)")
    parser.add_argument("--validation-fraction", type=float_in(0, 0.99), default=0.1,
                        help="share of the files in the validation split when CAPTIONS has "
                        "no split column (default 0.1)")
    parser.add_argument("--test-fraction", type=float_in(0, 0.99), default=0.1,
                        help="share of the files in the test split (default 0.1)")
    parser.add_argument("--max-pixels", type=int_in(1, 2**31 - 1), default=MAX_PIXELS,
                        help="largest frame (width x height) decoded; larger videos are "
                        f"skipped before decoding (default {MAX_PIXELS:,}: 3840x2160)")


# ------------------------------------------------------------------------------ plan
@dataclasses.dataclass
class Item:
    item_id: str
    start: float | None  # None: the whole video
    end: float | None
    rows: list


@dataclasses.dataclass
class Video:
    stem: str
    path: Path
    items: list
    split: str | None = None


def _files(src: Path) -> dict[str, list[Path]]:
    if not src.is_dir():
        raise BuildError(f"--src {src} is not a folder of video files")
    files = defaultdict(list)
    for path in sorted(src.iterdir()):
        if path.is_file() and not path.name.startswith("."):
            files[path.stem].append(path)
    return files


def _pick_file(stem, paths):
    if len(paths) == 1:
        return paths[0], None
    videos = [p for p in paths if p.suffix.lower() in VIDEO_SUFFIXES]
    if len(videos) == 1:
        return videos[0], None
    return None, " and ".join(p.name for p in paths)


def _match_file(video_id: str, files: dict, src: Path):
    """``(stem, path, None)`` of the file ``video_id`` names (its stem, or its whole name),
    else ``(None, None, (problem, fix))``."""
    paths = files.get(video_id)
    if paths:
        path, clash = _pick_file(video_id, paths)
        if path is None:
            return None, None, ("several files for one video_id",
                                f"{clash}: write the video_id with its extension")
        return video_id, path, None
    named = Path(video_id)
    if named.name == video_id and named.stem in files:
        for path in files[named.stem]:
            if path.name == video_id:
                return named.stem, path, None
        there = " or ".join(p.name for p in files[named.stem])
        fix = f"there is {there} in {src}: write {named.stem} or the file's name"
        return None, None, ("no video file", fix)
    return None, None, ("no video file", f"no file {video_id}.* in {src}")


def plan_videos(rows, src: Path, captions_path, reporter: Reporter) -> dict[str, Video]:
    """Group caption rows into files and items; rows of missing files are reported."""
    files = _files(src)
    videos: dict[str, Video] = {}
    items: dict[tuple, Item] = {}
    for row in rows:
        where = f"line {row.line}"
        stem, path, problem = _match_file(row.video_id, files, src)
        if path is None:
            reporter.problem(problem[0], captions_path, f"{where}, field video_id",
                             row.video_id, problem[1])
            continue
        video = videos.setdefault(stem, Video(stem, path, []))
        if video.path != path:
            reporter.problem("one video_id, two files", captions_path,
                             f"{where}, field video_id", row.video_id,
                             f"other rows name {video.path.name}")
            continue
        key: tuple[str, None] | tuple[str, float, float]  # the whole video, or a segment
        if row.start is None:
            key, item_id, start, end = (stem, None), stem, None, None
        else:
            start, end = round(row.start, 2), round(row.end, 2)
            if start >= end:
                reporter.problem("segment shorter than 0.01 s", captions_path,
                                 f"{where}, field end", f"{row.start} {row.end}")
                continue
            key, item_id = (stem, start, end), f"{stem}_{start:.2f}_{end:.2f}"
        if key not in items:
            items[key] = Item(item_id, start, end, [])
            video.items.append(items[key])
        items[key].rows.append(row)
    ids = defaultdict(list)
    for video in videos.values():
        for item in video.items:
            ids[item.item_id].append(video.stem)
    for item_id, stems in ids.items():
        if len(stems) > 1:
            raise BuildError(f"video id {item_id!r} names both a segment and a file "
                             f"({stems}); rename one of the files")
    unused = sum(1 for stem in files if stem not in videos)
    if unused:
        reporter.note(f"{unused} file(s) in {src} have no caption and are left out")
    return {stem: videos[stem] for stem in sorted(videos)}


def _check_fractions(validation: float, test: float) -> None:
    for name, value in (("--validation-fraction", validation), ("--test-fraction", test)):
        if not 0 <= value < 1:
            raise BuildError(f"{name} {value}: use a number in [0, 1)")
    if validation + test >= 1:
        raise BuildError("--validation-fraction + --test-fraction must be below 1")


def assign_splits(videos: dict[str, Video], captions_path, reporter: Reporter,
                  validation: float, test: float) -> dict:
    """Each item's split (module docstring), over the files that could be read; returns
    the rule recorded in rudder.json."""
    _check_fractions(validation, test)
    free = sorted((s for s, v in videos.items()
                   if not any(r.split for i in v.items for r in i.rows)),
                  key=lambda s: hashlib.sha256(s.encode("utf-8")).hexdigest())
    n = len(free)
    n_val = round(validation * n) or (1 if validation and n >= 3 else 0)
    n_test = round(test * n) or (1 if test and n >= 3 else 0)
    rank = {stem: k for k, stem in enumerate(free)}
    for stem, video in videos.items():
        default = None
        if stem in rank:
            k = rank[stem]
            default = "validation" if k < n_val else "test" if k < n_val + n_test else "train"
        for item in video.items:
            given = {r.split for r in item.rows if r.split}
            item.split = given.pop() if len(given) == 1 else default or "train"
            if given:  # more than one split named for the same item
                bad = [r for r in item.rows if r.split and r.split != item.split]
                for row in bad:
                    reporter.problem("one video in two splits", captions_path,
                                     f"line {row.line}, field split", row.split,
                                     f"{item.item_id} is in {item.split} by an earlier row")
                item.rows = [r for r in item.rows if r not in bad]
    return {"rule": "split column; else files by SHA-256 of the stem", "validation_fraction":
            validation, "test_fraction": test, "files_split_by_rule": n}


# ----------------------------------------------------------------------------- parts
def _part_path(work: Path, stem: str) -> Path:
    name = stem if stem.isascii() and "/" not in stem else hashlib.sha256(stem.encode()).hexdigest()
    return work / f"{name}.npz"


def _item_key(video: Video) -> list:
    return [[i.item_id, i.start, i.end] for i in video.items]


def read_part(path: Path, arrays: bool = True):
    """``(meta, arrays)`` of a part file (``arrays=False``: ``{key: None}``, not read), or
    None when it is missing or damaged."""
    try:
        with np.load(path, allow_pickle=False) as data:
            meta = json.loads(str(data["meta"]))
            found = {k: data[k] if arrays else None for k in data.files if k != "meta"}
    except (OSError, ValueError, KeyError, EOFError, zipfile.BadZipFile):
        return None
    return meta, found


def _part_is_current(path: Path, video: Video, max_pixels: int = MAX_PIXELS) -> bool:
    """Whether the part of ``video`` was made from this file and these items (a file
    refused for its frame size is retried under a higher ``max_pixels``)."""
    found = read_part(path, arrays=False) if path.is_file() else None
    if found is None:
        return False
    meta, _ = found
    stat = video.path.stat()
    if meta.get("error_kind") == TOO_LARGE and max_pixels > meta.get("max_pixels", 0):
        return False
    return (meta.get("items") == _item_key(video) and meta.get("size") == stat.st_size
            and meta.get("mtime_ns") == stat.st_mtime_ns)


def write_part(path: Path, video: Video, info: dict | None, error: str | None, store,
               error_kind: str | None = None, max_pixels: int = MAX_PIXELS) -> None:
    stat = video.path.stat()
    segments = (info or {}).get("segments") or [None] * len(video.items)
    meta = {
        "stem": video.stem, "file": video.path.name, "size": stat.st_size,
        "mtime_ns": stat.st_mtime_ns, "items": _item_key(video), "error": error,
        "error_kind": (error_kind or UNREADABLE) if error else None, "max_pixels": max_pixels,
        "duration": (info or {}).get("duration"), "has_audio": (info or {}).get("has_audio"),
        "segments": segments,
    }
    arrays = {"meta": np.array(json.dumps(meta))}
    for (expert, item), pieces in sorted(store.items()):
        arrays[f"{expert}|{item}"] = np.concatenate(pieces).astype(np.float32)
    buffer = io.BytesIO()
    np.savez(buffer, allow_pickle=False, **arrays)
    with replacing(path) as tmp:
        tmp.write_bytes(buffer.getvalue())


# ------------------------------------------------------------------------------ run
def _shard(text: str | None) -> tuple[int, int]:
    if text is None:
        world = os.environ.get("WORLD_SIZE")
        if world and world.isdigit() and int(world) > 1:
            text = f"{os.environ.get('RANK', '0')}/{world}"
        else:
            return 0, 1
    k, sep, n = text.partition("/")
    if not (sep and k.isdigit() and n.isdigit() and 0 <= int(k) < int(n)):
        raise BuildError(f"--shard {text!r}: use K/N with 0 <= K < N, e.g. 0/4")
    return int(k), int(n)


def _device(choice: str) -> str:
    import torch

    if choice == "cuda" and not torch.cuda.is_available():
        raise BuildError("--device cuda: no CUDA device is available here (use --device cpu)")
    return "cuda" if choice == "auto" and torch.cuda.is_available() else (
        "cpu" if choice == "auto" else choice)


def _recorded_command(argv) -> str:
    kept, skip = [], False
    for arg in argv:
        if skip:
            skip = False
            continue
        name = arg.split("=", 1)[0]
        if name in NOT_RECORDED:
            skip = "=" not in arg and name != "--overwrite"
            continue
        kept.append(arg)
    return recorded_command(kept)


def _check_out(args) -> Path:
    out = args.out.resolve()
    for flag, path in (("--src", args.src), ("--captions", args.captions)):
        if out == path.resolve() or out in path.resolve().parents:
            raise BuildError(f"--out {args.out} is or contains {flag} {path}; choose another")
    if out.exists() and not (out / "rudder.json").is_file():
        raise BuildError(f"{args.out} exists and is not a rudder dataset folder; choose "
                         "another --out")
    return out


def _signature(experts, fps) -> dict:
    return {"version": PARTS_VERSION, "fps": fps,
            "experts": {e.spec.name: e.record() for e in experts}}


def _signature_of(out: Path, key: str = "build_signature"):
    """What a ``build videos`` folder records under ``extra[key]`` (None if nothing): the
    experts' signature, or ``inputs_sha256``."""
    try:
        meta = json.loads((out / "rudder.json").read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    return meta.get("extra", {}).get(key) if isinstance(meta, dict) else None


def inputs_digest(videos: dict) -> str:
    """SHA-256 of what the folder is built from besides the experts: each file's name and
    size, its items and their caption rows."""
    plan = [[v.path.name, v.path.stat().st_size,
             [[i.item_id, [[r.line, r.lang, r.text, r.split] for r in i.rows]]
              for i in v.items]] for v in videos.values()]
    return hashlib.sha256(json.dumps(plan, ensure_ascii=False).encode("utf-8")).hexdigest()


def _open_work(work: Path, signature: dict, overwrite: bool) -> None:
    """Create the parts folder, or check that its parts were made with these experts."""
    stamp = work / "build.json"
    if stamp.is_file():
        old = json.loads(stamp.read_text(encoding="utf-8"))
        if old != signature:
            if not overwrite:
                raise BuildError(
                    f"{work} holds features made with other experts, weights or --fps "
                    f"({_difference(old, signature)}): mixing them would give inconsistent "
                    "features. Pass --overwrite to discard them, or use another --out/--work"
                )
            shutil.rmtree(work)
    work.mkdir(parents=True, exist_ok=True)
    if not stamp.is_file():
        atomic_write_text(stamp, json.dumps(signature, indent=2, sort_keys=True))


def _difference(old: dict, new: dict) -> str:
    if old.get("fps") != new.get("fps"):
        return f"fps {old.get('fps')} here, {new.get('fps')} now"
    a, b = old.get("experts", {}), new.get("experts", {})
    for name in sorted(set(a) | set(b)):
        if a.get(name) != b.get(name):
            def show(r):
                return "absent" if r is None else f"{r['spec']} sha256 {r['weights_sha256']}"
            return f"expert {name}: {show(a.get(name))} there, {show(b.get(name))} now"
    return "format version"


def run_build(args, argv) -> int:
    from rudder.optional import Need, check_installed

    from .video_experts import DEFAULT_EXPERTS, parse_spec

    check_installed([Need("av", "videos", "decoding video files (build videos)")] + (
        [Need("ray", "ray", "--engine ray")] if args.engine == "ray" else []))
    out = _check_out(args)
    work = (args.work or out.with_name(out.name + ".parts")).resolve()
    if work.is_dir() and not (work / "build.json").is_file() and any(work.iterdir()):
        raise BuildError(f"--work {work} holds files that are not a video build's parts (no "
                         "build.json): name a new or empty folder (the parts folder is removed "
                         "after a one-process build)")
    shard = _shard(args.shard)
    if args.workers is not None and args.workers < 0:
        raise BuildError(f"--workers {args.workers}: use 0 (decode in this process) or more")
    if args.fps <= 0 or not np.isfinite(args.fps):
        raise BuildError(f"--fps {args.fps}: use a positive number")
    specs = [parse_spec(text) for text in (args.expert or DEFAULT_EXPERTS)]
    names = [s.name for s in specs]
    if len(set(names)) != len(names):
        raise BuildError(f"--expert: a name is used twice ({names})")
    reporter = Reporter(strict=args.strict, examples=EXAMPLES)
    try:
        return _build(args, argv, out, work, shard, specs, reporter)
    except NothingToBuild:
        if reporter.counts or reporter.warnings:
            if work.is_dir():  # the parts stay for a rerun: the report beside them
                atomic_write_text(work / REPORT_NAME, reporter.report_text())
                print(reporter.summary(work / REPORT_NAME), file=sys.stderr)
            else:
                print(reporter.summary(everything=True), file=sys.stderr)
        raise


def _build(args, argv, out, work, shard, specs, reporter) -> int:
    from .video_experts import load_expert

    rows = read_captions(args.captions, reporter)
    videos = plan_videos(rows, args.src, args.captions, reporter)
    if not videos:
        raise NothingToBuild(f"{args.captions}: no caption names a file in {args.src} (see "
                             "the problems above)")
    _check_fractions(args.validation_fraction, args.test_fraction)
    split_rule = (args.validation_fraction, args.test_fraction)
    # with Ray the experts are loaded here on the CPU and run where the cluster has room
    device = "cpu" if args.engine == "ray" else _device(args.device)
    experts = [load_expert(spec, args.fps, device) for spec in specs]
    for expert in experts:
        if expert.spec.weights == "random":
            print(f"WARNING: expert {expert.spec.name} ({expert.spec.arch}) has RANDOM "
                  "weights: its features only check the pipeline", file=sys.stderr)
    signature = _signature(experts, args.fps)
    if out.exists() and not args.overwrite and (shard[1] == 1 or _signature_of(out) != signature):
        raise BuildError(f"{args.out} already exists; pass --overwrite to replace it")
    _open_work(work, signature, args.overwrite)
    stems = list(videos)[shard[0]::shard[1]]
    max_pixels = args.max_pixels
    todo = [s for s in stems
            if not _part_is_current(_part_path(work, s), videos[s], max_pixels)]
    if len(todo) < len(stems):
        print(f"resuming: {len(stems) - len(todo)} of {len(stems)} file(s) already done",
              file=sys.stderr)
    workers = args.workers if args.workers is not None else max(1, min(4,
                                                                     (os.cpu_count() or 2) - 1))
    if args.engine == "ray":
        from .video_ray import extract_ray

        def write(stem, info, error, store, error_kind):
            write_part(_part_path(work, stem), videos[stem], info, error, store, error_kind,
                       max_pixels)

        extract_ray(videos, todo, experts, write, args.device, args.workers,
                    max_pixels=max_pixels)
    else:
        extract(videos, todo, experts, work, workers, max_pixels=max_pixels)
    missing = [s for s in videos
               if not _part_is_current(_part_path(work, s), videos[s], max_pixels)]
    if missing:
        print(f"shard {shard[0]}/{shard[1]} done; {len(missing)} file(s) of other shards are "
              f"not done yet: the last shard to finish writes {args.out}", file=sys.stderr)
        return 0
    with dataset_lock(work, timeout=3600):
        if shard[1] > 1 and _signature_of(out) == signature and _signature_of(
            out, "inputs_sha256"
        ) == inputs_digest(videos):
            print(f"{args.out} was already written by another shard", file=sys.stderr)
            return 0
        assemble(videos, work, out, experts, reporter, signature, split_rule,
                 _recorded_command(argv), args.captions, overwrite=True)
    if shard[1] == 1:
        _remove_parts(work)
    return 0


def _remove_parts(work: Path) -> None:
    """Remove what the build wrote in ``work`` (parts, stamp, lock), then the folder if that
    leaves it empty: a file someone else put there stays."""
    for path in [*work.glob("*.npz"), work / "build.json", work / LOCK_NAME, work / REPORT_NAME]:
        path.unlink(missing_ok=True)
    try:
        work.rmdir()
    except OSError:
        print(f"left {work}: it holds files the build did not write", file=sys.stderr)


def extract(videos, todo, experts, work: Path, workers: int, progress: bool = True,
            max_pixels: int = MAX_PIXELS) -> dict:
    """Decode and encode the ``todo`` files, writing each one's part; returns timings."""
    from tqdm import tqdm

    from .video_pipeline import Extractor, run_tasks

    extractor = Extractor(experts)
    tasks = [extractor.task(s, videos[s].path, [(i.start, i.end) for i in videos[s].items],
                            max_pixels) for s in todo]
    stores: defaultdict[Any, dict] = defaultdict(dict)
    infos: dict[Any, Any] = {}
    # on a terminal a live bar; in a log file (a scheduler's) one line every 30 s
    bar = tqdm(total=len(tasks), unit="file", file=sys.stderr, disable=not progress,
               dynamic_ncols=True, mininterval=0.5 if sys.stderr.isatty() else 30)
    began = time.perf_counter()
    try:
        for message in run_tasks(tasks, workers):
            kind, stem = message[0], message[1]
            if kind == "info":
                infos[stem] = message[2]
            elif kind in ("frames", "patches"):
                extractor.features(message, stores[stem])
            else:
                error = message[2] if kind == "error" else None
                store = {} if error else stores.pop(stem, {})
                stores.pop(stem, None)
                write_part(_part_path(work, stem), videos[stem], infos.pop(stem, None), error,
                           store, message[3] if error else None, max_pixels)
                bar.update(1)
                seconds = time.perf_counter() - began
                bar.set_postfix_str(f"{extractor.frames_seen / max(seconds, 1e-9):.1f} frames/s")
    finally:
        bar.close()
    return {"seconds": time.perf_counter() - began, "frames": extractor.frames_seen}


# -------------------------------------------------------------------------- assemble
def assemble(videos, work, out, experts, reporter, signature, split_rule, command,
             captions_path, overwrite=True) -> Path:
    """Write the dataset folder from the parts (sorted by id, so the same bytes however the
    parts were computed)."""
    rows, dropped, media = [], [], {}
    captions = CaptionRows()
    durations, available, splits = {}, defaultdict(list), {}
    per_expert = defaultdict(list)  # expert -> [(item_id, stem, key)]
    for stem, video in videos.items():
        meta, arrays = read_part(_part_path(work, stem), arrays=False)
        if meta["error"]:
            lines = [r.line for i in video.items for r in i.rows]
            kind = meta.get("error_kind") or UNREADABLE
            fix = f"its {len(lines)} caption(s) are dropped"
            if kind == TOO_LARGE:
                fix += "; --max-pixels raises the limit"
            reporter.problem(kind, video.path, "file", meta["error"], fix)
            dropped += [{"line": r.line, "video_id": stem, "reason": meta["error"]}
                        for i in video.items for r in i.rows]
            continue
        for index, (item, segment) in enumerate(zip(video.items, meta["segments"], strict=False)):
            if isinstance(segment, str):
                for row in item.rows:
                    reporter.problem("segment outside the video", captions_path,
                                     f"line {row.line}, field start", row.start, segment)
                    dropped.append({"line": row.line, "video_id": stem, "reason": segment})
                continue
            start, end = segment
            rows.append((item, stem, start, end, index))
            media[item.item_id] = {"file": video.path.name, "start": start, "end": end}
            for expert in experts:
                key = f"{expert.spec.name}|{index}"
                if key in arrays:  # stored only when the expert gave rows
                    available[item.item_id].append(expert.spec.name)
                    per_expert[expert.spec.name].append((item.item_id, stem, key))
    if not rows:
        raise NothingToBuild("no video could be read; nothing to build (see the problems "
                             "above)")
    report = out / REPORT_NAME
    readable = {stem: videos[stem] for stem in sorted({stem for _, stem, *_ in rows})}
    split_rule = assign_splits(readable, captions_path, reporter, *split_rule)
    rows = [r for r in rows if r[0].rows]  # rows dropped for naming a second split
    rows.sort(key=lambda r: r[0].item_id)
    for item, _stem, start, end, _ in rows:
        durations[item.item_id] = end - start
        splits[item.item_id] = item.split
        for k, row in enumerate(item.rows):
            captions.add(f"{item.item_id}/{k}", item.item_id, row.lang, row.text, start, end)
    if dropped:
        lines = [d["line"] for d in dropped]
        reporter.note(f"dropped {len(dropped)} caption(s) of unreadable files or segments: "
                      f"{captions_path} lines {line_ranges(lines, EXAMPLES, report)}")
        reporter.details += [f"dropped captions ({len(dropped)}): line, video_id, reason"] + [
            f"  {captions_path}, line {d['line']}: {d['video_id']}: {d['reason']}"
            for d in sorted(dropped, key=lambda d: d["line"])]
    records = {e.spec.name: e.record() for e in experts}
    infos = {}
    for expert in experts:
        if per_expert[expert.spec.name]:
            infos[expert.spec.name] = ExpertInfo(expert.dim, variable_length=True)
        else:
            reporter.warn(f"expert {expert.spec.name}: no video has it (e.g. no file has an "
                          "audio track), so the dataset leaves it out")
    ids = [r[0].item_id for r in rows]
    videos_table = pa.table({
        "video_id": pa.array(ids, pa.string()),
        "duration": pa.array([durations[i] for i in ids], pa.float32()),
        "split": pa.array([splits[i] for i in ids], pa.string()),
        "experts": pa.array([sorted(e for e in available[i] if e in infos) for i in ids],
                            LIST_TYPE),
    })
    table = captions.table()
    languages = [lang for lang in SUPPORTED if lang in set(table.column("lang").to_pylist())]
    card = make_card("videos", _how_built(command, records, split_rule, reporter),
                     fields_section(table.schema, infos, False))
    meta = DatasetMeta(
        name="videos", version="1.0", languages=languages, experts=infos,
        extra={"source": "videos", "command": command, "experts": records,
               "build_signature": signature, "inputs_sha256": inputs_digest(videos),
               "split": split_rule, "media": media,
               "dropped_captions": dropped, "build": reporter.as_dict(),
               "card": dataclasses.asdict(card)},
    )
    try:
        with DatasetWriter(out, meta, card, overwrite=overwrite) as writer:
            writer.write_videos(videos_table)
            writer.write_captions(table)
            for name in sorted(infos):
                writer.write_expert(name, _feature_batches(work, videos, per_expert[name]))
            (writer.tmp / REPORT_NAME).write_text(reporter.report_text(), encoding="utf-8")
    except LayoutError as error:
        raise BuildError(str(error)) from None
    counts = {s: int(sum(1 for i in ids if splits[i] == s)) for s in SPLITS}
    print(f"built {out}: videos {counts}; captions {len(table)}; experts {sorted(infos)}",
          file=sys.stderr)
    print(reporter.summary(report), file=sys.stderr)
    print(f"the full report: {report}", file=sys.stderr)
    return out


def _feature_batches(work, videos, entries, batch: int = 256):
    """``(ids, arrays)`` batches of one expert in ``entries`` order, one part file open at
    a time and one batch in memory."""
    ids, arrays, open_stem, data = [], [], None, None
    try:
        for item_id, stem, key in entries:
            if data is None or stem != open_stem:
                if data is not None:
                    data.close()
                data, open_stem = np.load(_part_path(work, stem), allow_pickle=False), stem
            ids.append(item_id)
            arrays.append(data[key])
            if len(ids) == batch:
                yield ids, arrays
                ids, arrays = [], []
        if ids:
            yield ids, arrays
    finally:
        if data is not None:
            data.close()


def _how_built(command, records, split_rule, reporter) -> str:
    lines = [f"Built with `{command}` (rudder datasets_scripts build videos).", ""]
    for name, record in sorted(records.items()):
        if record["weights"].startswith("random"):
            lines.append(f"- **WARNING: expert `{name}` ({record['architecture']}) has RANDOM "
                         "weights. Its features only check the pipeline; do not use them for "
                         "retrieval.**")
    for name, record in sorted(records.items()):
        detail = ", ".join(f"{k} {v}" for k, v in record.items() if k not in ("spec",))
        lines.append(f"- expert `{name}` = `{record['spec']}`: {detail}")
    lines.append(f"- splits: {split_rule['rule']} (validation {split_rule['validation_fraction']}"
                 f", test {split_rule['test_fraction']})")
    lines.append("- captions with times are segments, each its own video "
                 "`<file stem>_<start>_<end>`; times are seconds in the source file")
    if reporter.counts:
        skipped = ", ".join(f"{k}: {n}" for k, n in reporter.counts.most_common())
        lines.append(f"- Bad input skipped: {skipped}.")
    lines += [f"- Warning: {w}" for w in reporter.warnings]
    return "\n".join(lines)
