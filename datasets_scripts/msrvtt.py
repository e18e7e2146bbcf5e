"""MSR-VTT (Xu et al., CVPR 2016) -> the rudder dataset layout.

Release files in ``--src``: ``MSRVTT_data.json`` (all 10,000 videos), or
``train_val_videodatainfo.json`` plus optionally ``test_videodatainfo.json``; each
``{"videos": [{video_id, split, "start time", "end time", ...}], "sentences": [{video_id,
caption, sen_id}]}``. For 1k-A also ``MSRVTT_JSFUSION_test.csv`` (``key,vid_key,video_id,sentence``)
and, when present, CE's lists ``train_list_jsfusion.txt`` / ``val_list_jsfusion.txt``.

Splits (``--split``):

- ``full``: the videos' own ``split`` field (train / validate / test: 6,513 / 497 / 2,990, the
  ids in CE's ``{train,val,test}_list_full.txt``; ``wc -l`` says 6,512 / 496 / 2,990 because
  the first two files lack a final newline: those are the RUDDER paper's counts, one video
  short in train and validation; every listed video is kept here).
- ``1k-A`` (JSFusion, Yu et al. 2018): the 1,000 videos of the CSV are ``test`` with the CSV's
  one sentence each (checked against ``val_list_jsfusion.txt``; with ``--text-features`` each
  takes the entry of the same sentence among its video's JSON captions); ``train`` is
  ``train_list_jsfusion.txt`` (9,000), or every other video without it; no validation split,
  as the published protocol has none. Without the annotation JSON, the CSV alone builds the
  test split (the train videos have no captions outside the JSON).
- ``lists``: ``--split-lists train=FILE validation=FILE test=FILE`` (any subset), one video
  id per line (e.g. 1k-B's lists); videos in no list are left out.

``--captions-per-video 1`` keeps each video's sentence with the lowest ``sen_id`` (CE's
deterministic "first N captions"), the low-resource setting of the RUDDER paper; 20 keeps all.
A clip's duration is ``end time - start time``; its captions span the whole clip. Sentences
are kept as written, without surrounding whitespace.
"""

from __future__ import annotations

import csv
import io
import json
import math
from collections import defaultdict
from pathlib import Path
from typing import Any

from rudder.data.layout import SPLITS

from .build import CaptionRows, RawDataset, read_id_list
from .build_report import BuildError, Reporter, not_utf8

JSON_FILES = ("MSRVTT_data.json", "train_val_videodatainfo.json", "test_videodatainfo.json")
TEST_CSV = "MSRVTT_JSFUSION_test.csv"
JSFUSION_LISTS = {"train": "train_list_jsfusion.txt", "test": "val_list_jsfusion.txt"}
SPLIT_NAMES = {
    "train": "train",
    "validate": "validation",
    "val": "validation",
    "validation": "validation",
    "test": "test",
}
PUBLISHED = {
    "full": {"train": 6513, "validation": 497, "test": 2990},
    "1k-A": {"train": 9000, "test": 1000},
}


def add_arguments(parser) -> None:
    parser.add_argument("--split", choices=("full", "1k-A", "lists"), default="full")
    parser.add_argument(
        "--split-lists",
        nargs="+",
        default=None,
        metavar="SPLIT=FILE",
        help="with --split lists: e.g. train=train_list.txt test=test_list.txt",
    )
    parser.add_argument("--captions-per-video", type=int, choices=(1, 20), default=20)


def _read_json(paths, reporter: Reporter):
    """Videos ``{id: {split, duration}}`` and sentences ``{id: [(sen_id, caption), ...]}``."""
    videos, sentences, seen_sen = {}, defaultdict(list), set()
    for path in paths:
        try:
            data = json.loads(path.read_text(encoding="utf-8"))
            video_items, sentence_items = data["videos"], data["sentences"]
        except UnicodeDecodeError as error:
            raise not_utf8(path, error) from error
        except (OSError, json.JSONDecodeError, KeyError, TypeError) as error:
            raise BuildError(
                f"{path}: not an MSR-VTT annotation file ({error!r}); expected "
                "{'videos': [...], 'sentences': [...]}"
            ) from error
        for index, item in enumerate(video_items):
            if not isinstance(item, dict) or "video_id" not in item:
                reporter.problem("missing field", path, f"videos[{index}]", item, "needs video_id")
                continue
            video_id = str(item["video_id"])
            if video_id in videos:
                reporter.problem("duplicate video id", path, f"videos[{index}]", video_id)
                continue
            try:
                duration = float(item["end time"]) - float(item["start time"])
            except (KeyError, TypeError, ValueError):
                duration = None
            bad = None
            if duration is not None and not math.isfinite(duration):
                bad = ("duration is not a finite number", "JSON NaN or Infinity is no time")
            elif duration is not None and duration <= 0:
                bad = ("time outside the video", "end time must follow start time")
            if bad:
                times = [item.get("start time"), item.get("end time")]
                reporter.problem(bad[0], path, f"videos[{index}]", times, bad[1])
                continue
            videos[video_id] = {
                "split": item.get("split"),
                "duration": duration,
                "where": (path, f"videos[{index}]"),
            }
        for index, item in enumerate(sentence_items):
            where = f"sentences[{index}]"
            if not isinstance(item, dict) or not {"video_id", "caption", "sen_id"} <= set(item):
                reporter.problem(
                    "missing field", path, where, item, "needs video_id, caption, sen_id"
                )
                continue
            caption = item["caption"].strip() if isinstance(item["caption"], str) else ""
            if item["sen_id"] in seen_sen:
                reporter.problem("duplicate sen_id", path, where, item["sen_id"])
            elif str(item["video_id"]) not in videos:
                reporter.problem("sentence of an unknown video", path, where, item["video_id"])
            elif not caption:
                reporter.problem("empty caption", path, where, item["caption"])
            else:
                seen_sen.add(item["sen_id"])
                sentences[str(item["video_id"])].append((item["sen_id"], caption))
    return videos, sentences


def _read_test_csv(path: Path, reporter: Reporter) -> dict[str, tuple[str, str]]:
    """1k-A test: ``{video_id: (key, sentence)}``; a record over several lines stops the build.

    Captions hold no line breaks, so a field that runs over lines is an unterminated quote
    that swallowed the rows after it.
    """
    if not path.is_file():
        raise BuildError(f"--split 1k-A needs {path} (key,vid_key,video_id,sentence)")
    rows = {}
    try:
        text = path.read_bytes().decode("utf-8-sig")
    except UnicodeDecodeError as error:
        raise not_utf8(path, error) from error
    reader = csv.DictReader(io.StringIO(text, newline=""))
    if not {"key", "video_id", "sentence"} <= set(reader.fieldnames or ()):
        raise BuildError(f"{path}: header {reader.fieldnames} lacks key, video_id, sentence")
    end = reader.line_num
    for row in reader:
        start, end = end + 1, reader.line_num
        if end > start or any("\n" in (v or "") or "\r" in (v or "") for v in row.values()):
            longest = max(len(v or "") for v in row.values() if isinstance(v, str))
            raise BuildError(
                f"{path}, line {start}: a quoted field runs over lines {start}-{end} "
                f"({longest:,} characters), swallowing the rows in between: an "
                "unterminated quote? Close or remove it (captions hold no line breaks)"
            )
        where = f"line {start}"
        if not row.get("video_id") or not (row.get("sentence") or "").strip():
            reporter.problem("missing field", path, where, row)
        elif row["video_id"] in rows:
            reporter.problem("duplicate video id", path, where, row["video_id"])
        else:
            rows[row["video_id"]] = (row["key"], row["sentence"].strip())
    return rows


def _release_position(sentence: str, video_sentences) -> int | None:
    """Where the 1k-A test ``sentence`` is among its video's captions in release (sen_id)
    order, case and spacing aside: its entry in CE's text-feature pickles (JSFusion sampled
    one of the 20; CE finds it with ``jsfusion_val_caption_idx.pkl``). None when absent."""
    wanted = " ".join(sentence.lower().split())
    for position, (_, caption) in enumerate(sorted(video_sentences)):
        if " ".join(caption.lower().split()) == wanted:
            return position
    return None


def _one_k_a_splits(src: Path, videos: dict, test_rows: dict, reporter: Reporter) -> dict:
    """1k-A: test = the CSV's videos, train = train_list_jsfusion.txt (or every other video)."""
    test_list = src / JSFUSION_LISTS["test"]
    if test_list.is_file():
        listed = read_id_list(test_list, reporter)
        for video_id, number in listed.items():
            if video_id not in test_rows:
                reporter.problem(
                    "listed test video has no CSV sentence", test_list, f"line {number}", video_id
                )
        extra = sorted(set(test_rows) - set(listed))
        if extra:
            reporter.warn(f"{TEST_CSV}: {len(extra)} video(s) not in {test_list}: {extra[:3]}")
    for video_id in test_rows:
        videos.setdefault(video_id, {"split": "test", "duration": None, "where": None})
    assigned = dict.fromkeys(test_rows, "test")
    if not any(v["where"] for v in videos.values()):
        reporter.note(
            f"no annotation JSON: only the test split is built (the {TEST_CSV} sentences); "
            "train captions need MSRVTT_data.json"
        )
        return assigned
    train_list = src / JSFUSION_LISTS["train"]
    if not train_list.is_file():
        return {**dict.fromkeys(videos, "train"), **assigned}
    for video_id, number in read_id_list(train_list, reporter).items():
        if video_id not in videos or video_id in assigned:
            why = "a 1k-A test video" if video_id in assigned else "not in the annotation JSON"
            reporter.problem("bad id in split list", train_list, f"line {number}", video_id, why)
        else:
            assigned[video_id] = "train"
    return assigned


def _list_splits(pairs, videos, reporter: Reporter) -> dict[str, str]:
    if not pairs:
        raise BuildError(
            "--split lists needs --split-lists SPLIT=FILE ... (splits: train, validation, test)"
        )
    assigned: dict[str, Any] = {}
    for pair in pairs:
        split, sep, file = pair.partition("=")
        if not sep or split not in SPLITS:
            raise BuildError(f"--split-lists {pair!r}: use SPLIT=FILE with SPLIT in {list(SPLITS)}")
        for video_id, number in read_id_list(file, reporter).items():
            if video_id not in videos:
                reporter.problem(
                    "unknown video id in split list",
                    file,
                    f"line {number}",
                    video_id,
                    "not in the annotation JSON",
                )
            elif video_id in assigned:
                reporter.problem(
                    "video in two split lists",
                    file,
                    f"line {number}",
                    video_id,
                    f"already in {assigned[video_id]}",
                )
            else:
                assigned[video_id] = split
    return assigned


def read(args, reporter: Reporter) -> RawDataset:
    src = Path(args.src)
    paths = (
        [src / JSON_FILES[0]]
        if (src / JSON_FILES[0]).is_file()
        else [src / name for name in JSON_FILES[1:] if (src / name).is_file()]
    )
    csv_only = not paths and args.split == "1k-A" and (src / TEST_CSV).is_file()
    if not paths and not csv_only:
        raise BuildError(
            f"{src}: no {' / '.join(JSON_FILES)} (without them only --split 1k-A builds, "
            f"its test split from {TEST_CSV})"
        )
    if args.split_lists and args.split != "lists":
        raise BuildError("--split-lists is only used with --split lists")
    videos, sentences = _read_json(paths, reporter)
    test_rows = _read_test_csv(src / TEST_CSV, reporter) if args.split == "1k-A" else {}
    if args.split == "lists":
        assigned = _list_splits(args.split_lists, videos, reporter)
    elif args.split == "1k-A":
        assigned = _one_k_a_splits(src, videos, test_rows, reporter)
    else:
        assigned = {}
        for video_id, video in videos.items():
            split = SPLIT_NAMES.get(str(video["split"]).lower())
            if split is None:
                file, where = video["where"]
                reporter.problem(
                    "unknown split", file, where, video["split"], "expected train, validate or test"
                )
            else:
                assigned[video_id] = split
    kept = {v: {"split": s, "duration": videos[v]["duration"]} for v, s in assigned.items()}
    captions, feature_entries = CaptionRows(), {}
    for video_id, info in kept.items():
        if video_id in test_rows:
            key, sentence = test_rows[video_id]
            captions.add(f"{video_id}/{key}", video_id, "en", sentence, 0.0, info["duration"])
            feature_entries[f"{video_id}/{key}"] = _release_position(
                sentence, sentences.get(video_id, []))
            continue
        for sen_id, caption in sorted(sentences.get(video_id, []))[: args.captions_per_video]:
            captions.add(f"{video_id}/{sen_id}", video_id, "en", caption, 0.0, info["duration"])
    if len(kept) < len(videos):
        reporter.note(f"{len(videos) - len(kept)} video(s) are in no split and are left out")
    raw = RawDataset(
        "msrvtt",
        kept,
        captions,
        extra={"split": args.split, "captions_per_video": args.captions_per_video},
        feature_entries=feature_entries,
    )
    if args.split in PUBLISHED:
        got = raw.counts()
        published = {"test": 1000} if csv_only else PUBLISHED[args.split]
        expected = {f"videos/{s}": n for s, n in published.items()}
        cpv = args.captions_per_video
        expected.update(
            {
                f"captions/{s}": n if (s == "test" and args.split == "1k-A") else n * cpv
                for s, n in published.items()
            }
        )
        reporter.check_counts(
            f"MSR-VTT {args.split}", expected, {k: got.get(k, 0) for k in expected}
        )
    raw.method += [
        f"split {args.split}"
        + (
            " (1k-A: test = the JSFusion CSV's 1,000 videos and sentences; train = "
            "train_list_jsfusion.txt, or all other videos; no validation split)"
            if args.split == "1k-A"
            else ""
        ),
        f"captions per video: {args.captions_per_video} (lowest sen_id first)",
    ]
    return raw
