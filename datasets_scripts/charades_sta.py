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
Times that are not finite numbers (``nan``, ``inf``) are bad lines, named by file and line.
With durations, a moment ending after its video (4 of 42 test lines checked against
``Charades_v1_test.csv`` do) ends at the duration instead, as 2D-TAN's loader clips it
(``min(end, duration)``); one starting at or after the end is a bad line. The sentence is
kept as written, without its surrounding whitespace.

**Clips as videos** (the RUDDER paper's protocol): ``--clip-lists train=FILE
validation=FILE test=FILE`` makes every listed moment its own video, with one caption, and
takes the splits from the lists alone (the paper's counts, 3,124 / 121 / 1,015 clips, are
checked). A clip list is UTF-8 text, one clip per line; blank lines and lines starting
with ``#`` are ignored::

    # a moment (its first sentence in file order), then a moment with the sentence to take
    3MSZA 24.3 30.4
    3MSZA 24.3 30.4##person flipped the light switch near the door.

Times are seconds, matched to the STA files at 0.01 s; several sentences share a moment
(the test file has 3,720 lines over 2,578 moments), so a line without ``##sentence`` takes
the first and the build notes how many did so. The clip's video id is
``<VIDEOID>_<start>_<end>`` with two decimals (``3MSZA_24.30_30.40``): expert features of
clips are looked up under that id. Its duration is ``end - start``; its caption
(``<clip>/0``) spans it. The paper's 4,260 clips are more than the shipped test file's
3,720 moments, so its lists draw on both files: put ``charades_sta_train.txt`` and
``charades_sta_test.txt`` in ``--src`` and pass the three lists; a clip found in neither
file is reported with its list and line.
"""

from __future__ import annotations

import contextlib
import math
import re
from collections import defaultdict
from pathlib import Path
from typing import Any

from rudder.cli import float_in
from rudder.data.layout import SPLITS

from .build import CaptionRows, RawDataset, holdout_validation, read_json
from .build_report import BuildError, Reporter

LINE = re.compile(r"^(\S+) (\S+) (\S+)##(.*)$")
PUBLISHED = {
    "train": {"moments": 12408, "videos": 5338},
    "test": {"moments": 3720, "videos": 1334},
}
RUDDER_CLIPS = {"train": 3124, "validation": 121, "test": 1015}
CLIP_LINE = re.compile(r"^(\S+)\s+(\S+)\s+(\S+?)(?:##(.*))?$")


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
        type=float_in(0.0, 0.99),
        default=0.1,
        help="share of the train file's videos held out for validation (default 0.1)",
    )
    parser.add_argument(
        "--clip-lists",
        nargs="+",
        default=None,
        metavar="SPLIT=FILE",
        help="clips as videos (RUDDER protocol): lists of 'VIDEOID start end[##sentence]' "
        "lines, e.g. train=train_clips.txt validation=val_clips.txt test=test_clips.txt",
    )


def read_durations(path: Path) -> dict[str, float]:
    data = read_json(path, "durations")
    if not isinstance(data, dict):
        raise BuildError(f"{path}: expected a JSON object {{video_id: duration}}")
    durations = {}
    for video_id, value in data.items():
        value = value.get("duration") if isinstance(value, dict) else value
        try:  # a missing duration (None) or a value that is no number: NaN, refused below
            durations[str(video_id)] = math.nan if value is None else float(value)
        except (TypeError, ValueError):
            durations[str(video_id)] = math.nan
        if not math.isfinite(durations[str(video_id)]) or durations[str(video_id)] <= 0:
            raise BuildError(
                f"{path}: video {video_id!r} has no positive finite duration ({value!r})"
            )
    return durations


def parse_file(path: Path, durations: dict, reporter: Reporter):
    """Moments of one file as ``{video_id: [(start, end, sentence), ...]}`` in file order."""
    try:
        lines = path.read_text(encoding="utf-8").splitlines()
    except (OSError, UnicodeDecodeError) as error:
        raise BuildError(f"{path}: cannot read it as UTF-8 text ({error})") from error
    moments, seen, clipped = defaultdict(list), set(), 0
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
        if not (math.isfinite(start) and math.isfinite(end)):
            reporter.problem(
                "time is not a finite number", path, where, f"{start_text} {end_text}"
            )
            continue
        if not sentence:
            reporter.problem("missing sentence", path, where, line)
            continue
        duration = durations.get(video_id)
        if start < 0 or start > end or (duration is not None and start >= duration):
            limit = "need 0 <= start <= end" + (
                f" and start < duration {duration}" if duration is not None else ""
            )
            reporter.problem("time outside the video", path, where, f"{start} {end}", limit)
            continue
        if duration is not None and end > duration:
            end = duration  # the annotators' end can overrun the video (2D-TAN clips it too)
            clipped += 1
        if (video_id, start, end, sentence) in seen:
            reporter.problem("duplicate moment", path, where, line)
            continue
        seen.add((video_id, start, end, sentence))
        moments[video_id].append((start, end, sentence))
    if clipped:
        reporter.note(f"{path.name}: {clipped} moment(s) ending after their video's duration "
                      "end at the duration")
    return moments


def _clip_id(video_id: str, start: float, end: float) -> str:
    return f"{video_id}_{start:.2f}_{end:.2f}"


def _clip_lines(path: Path, reporter: Reporter):
    """``(line number, video_id, start, end, sentence or None)`` of a clip list."""
    try:
        lines = path.read_text(encoding="utf-8").splitlines()
    except (OSError, UnicodeDecodeError) as error:
        raise BuildError(f"{path}: cannot read the clip list ({error})") from error
    for number, line in enumerate(lines, start=1):
        line = line.strip()
        if not line or line.startswith("#"):
            continue
        match = CLIP_LINE.match(line)
        start = end = math.nan
        if match is not None:
            with contextlib.suppress(ValueError):
                start, end = float(match[2]), float(match[3])
        if match is None or not (math.isfinite(start) and math.isfinite(end)):
            reporter.problem(
                "malformed clip line", path, f"line {number}", line, "expected 'VIDEOID start end'"
            )
            continue
        sentence = match[4].strip() if match[4] is not None else None
        yield number, match[1], start, end, sentence


def read_clips(args, files: dict, durations: dict, reporter: Reporter) -> RawDataset:
    """The RUDDER protocol: each listed moment is a video with one caption (module docstring)."""
    sentences = defaultdict(list)
    for path in files.values():
        if path.is_file():
            for video_id, items in parse_file(path, durations, reporter).items():
                for start, end, sentence in items:
                    sentences[_clip_id(video_id, start, end)].append(sentence)
    videos: dict[str, Any] = {}
    captions, first_taken, expected = CaptionRows(), 0, {}
    for pair in args.clip_lists:
        split, sep, file = pair.partition("=")
        if not sep or split not in SPLITS:
            raise BuildError(f"--clip-lists {pair!r}: use SPLIT=FILE with SPLIT in {list(SPLITS)}")
        expected.update({f"{what}/{split}": RUDDER_CLIPS[split] for what in ("videos", "captions")})
        for number, video_id, start, end, sentence in _clip_lines(Path(file), reporter):
            clip, where = _clip_id(video_id, start, end), f"line {number}"
            found = sentences.get(clip, [])
            if not found:
                names = " or ".join(p.name for p in files.values())
                reporter.problem(
                    "clip not in the STA files", file, where, clip, f"no kept line of {names}"
                )
            elif sentence is not None and sentence not in found:
                reporter.problem("sentence not of this clip", file, where, sentence, clip)
            elif clip in videos:
                reporter.problem(
                    "clip listed twice", file, where, clip, f"in {videos[clip]['split']} already"
                )
            else:
                first_taken += sentence is None and len(found) > 1
                videos[clip] = {"split": split, "duration": end - start}
                captions.add(f"{clip}/0", clip, "en", sentence or found[0], 0.0, end - start)
    if first_taken:
        reporter.note(
            f"{first_taken} listed clip(s) have several sentences and name none: the first in "
            "file order is their caption (add '##sentence' to the list line to choose)"
        )
    raw = RawDataset("charades_sta", videos, captions, extra={"protocol": "clips"})
    reporter.check_counts("Charades-STA clips (RUDDER protocol)", expected, raw.counts())
    raw.method.append(
        "clips as videos (RUDDER protocol): each listed moment is a video "
        "<VIDEOID>_<start>_<end> with one caption spanning it; splits from --clip-lists"
    )
    return raw


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
    if args.clip_lists:
        return read_clips(args, files, durations, reporter)
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
