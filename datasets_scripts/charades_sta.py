"""Charades-STA (Gao et al., ICCV 2017) -> the rudder dataset layout.

Release files in ``--src``: ``charades_sta_train.txt`` and/or ``charades_sta_test.txt``,
lines ``VIDEOID start end##sentence`` (seconds); optional ``charades.json``
(``{video_id: {"duration": seconds, ...}}``, as shipped with VSLNet/2D-TAN-style loaders, or
``{video_id: seconds}``) for durations, or ``--durations FILE`` in the same format.

Each line is one caption of its video (one caption per clip, as in the RUDDER paper), with
its moment as ``start``/``end``. Splits are by video: the test file is ``test``; the train
file is split into ``train`` and ``validation``, the latter a deterministic hold-out of
``--validation-fraction`` (default 10%) of its videos (the smallest SHA-256 of the id).
Published counts: train 12,408 moments / 5,338 videos, test 3,720 moments / 1,334 videos.
"""

from __future__ import annotations

import re
from collections import defaultdict
from pathlib import Path

from datasets_scripts.build import CaptionRows, RawDataset, holdout_validation, read_json
from datasets_scripts.report import BuildError, Reporter

LINE = re.compile(r"^(\S+) (\S+) (\S+)##(.*)$")
PUBLISHED = {
    "train": {"moments": 12408, "videos": 5338},
    "test": {"moments": 3720, "videos": 1334},
}


def add_arguments(parser) -> None:
    parser.add_argument(
        "--durations",
        type=Path,
        default=None,
        help="JSON {video_id: {'duration': s}} or {video_id: s} "
        "(default: SRC/charades.json when present)",
    )
    parser.add_argument(
        "--validation-fraction",
        type=float,
        default=0.1,
        help="share of the train file's videos held out for validation (default 0.1)",
    )


def read_durations(path: Path) -> dict[str, float]:
    data = read_json(path, "durations")
    if not isinstance(data, dict):
        raise BuildError(f"{path}: expected a JSON object {{video_id: duration}}")
    durations = {}
    for video_id, value in data.items():
        value = value.get("duration") if isinstance(value, dict) else value
        try:
            durations[str(video_id)] = float(value)
        except (TypeError, ValueError):
            raise BuildError(
                f"{path}: video {video_id!r} has no numeric duration ({value!r})"
            ) from None
    return durations


def parse_file(path: Path, durations: dict, reporter: Reporter):
    """Moments of one file as ``{video_id: [(start, end, sentence), ...]}`` in file order."""
    try:
        lines = path.read_text(encoding="utf-8").splitlines()
    except (OSError, UnicodeDecodeError) as error:
        raise BuildError(f"{path}: cannot read it as UTF-8 text ({error})") from error
    moments, seen = defaultdict(list), set()
    for number, line in enumerate(lines, start=1):
        if not line.strip():
            continue
        where = f"line {number}"
        match = LINE.match(line.strip())
        if not match:
            reporter.problem(
                "malformed line", path, where, line, "expected 'VIDEOID start end##sentence'"
            )
            continue
        video_id, start_text, end_text, sentence = match.groups()
        sentence = sentence.strip()
        try:
            start, end = float(start_text), float(end_text)
        except ValueError:
            reporter.problem("time is not a number", path, where, f"{start_text} {end_text}")
            continue
        if not sentence:
            reporter.problem("missing sentence", path, where, line)
            continue
        duration = durations.get(video_id)
        if start < 0 or start > end or (duration is not None and end > duration):
            limit = "need 0 <= start <= end" + (
                f" <= duration {duration}" if duration is not None else ""
            )
            reporter.problem("time outside the video", path, where, f"{start} {end}", limit)
            continue
        if (video_id, start, end, sentence) in seen:
            reporter.problem("duplicate moment", path, where, line)
            continue
        seen.add((video_id, start, end, sentence))
        moments[video_id].append((start, end, sentence))
    return moments


def read(args, reporter: Reporter) -> RawDataset:
    src = Path(args.src)
    durations_path = args.durations or (src / "charades.json")
    durations = read_durations(durations_path) if durations_path.is_file() else {}
    if args.durations and not durations_path.is_file():
        raise BuildError(f"--durations {durations_path}: no such file")
    files = {s: src / f"charades_sta_{s}.txt" for s in ("train", "test")}
    if not any(p.is_file() for p in files.values()):
        raise BuildError(
            f"{src}: neither charades_sta_train.txt nor charades_sta_test.txt is there"
        )
    videos, captions, got, expected = {}, CaptionRows(), {}, {}
    method = []
    for part, path in files.items():
        if not path.is_file():
            reporter.note(f"{path.name} not found: the dataset has no {part} videos from it")
            continue
        moments = parse_file(path, durations, reporter)
        for video_id in list(moments):
            if video_id in videos:
                reporter.problem(
                    "video in both train and test files",
                    path,
                    f"video {video_id!r}",
                    video_id,
                    "its moments in the test file are skipped",
                )
                del moments[video_id]
        held = holdout_validation(moments, args.validation_fraction) if part == "train" else set()
        for video_id, items in moments.items():
            split = "validation" if video_id in held else part
            videos[video_id] = {"split": split, "duration": durations.get(video_id)}
            for k, (start, end, sentence) in enumerate(items):
                captions.add(f"{video_id}/{k}", video_id, "en", sentence, start, end)
        got[f"{part} file moments"] = sum(len(m) for m in moments.values())
        got[f"{part} file videos"] = len(moments)
        expected.update({f"{part} file {k}": v for k, v in PUBLISHED[part].items()})
        if part == "train":
            method.append(
                f"validation: {len(held)} of the {len(moments)} videos of {path.name} "
                f"({args.validation_fraction:.0%}, smallest SHA-256 of the video id)"
            )
    reporter.check_counts("Charades-STA", expected, got)
    if not durations:
        reporter.note(
            "no durations (charades.json): video durations are left empty and only "
            "0 <= start <= end is checked"
        )
    method.append("one caption per moment line (kind 'caption', lang 'en'), start/end in seconds")
    return RawDataset(
        "charades_sta",
        videos,
        captions,
        method=method,
        extra={"validation_fraction": args.validation_fraction},
    )
