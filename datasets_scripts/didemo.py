"""DiDeMo (Hendricks et al., ICCV 2017) -> the rudder dataset layout.

Release files in ``--src``: ``{train,val,test}_data.json``, each a JSON list of
``{annotation_id, description, times, video, num_segments, ...}`` where ``times`` holds one
``[s, e]`` pair of 5-second segment indices per annotator, and optionally the Collaborative
Experts split lists ``{train,val,test}_list.txt`` (8,392 / 1,065 / 1,004 video file names;
``--lists DIR`` to take them from elsewhere).

- Video ids are the file names up to the first ``.`` (CE's convention, so CE features match).
  One video can appear under several file names, its annotations shared between containers
  (``val_data.json``: 1,094 file names over 1,065 videos; the test release 1,037 over 1,004):
  the annotations of all of a video's file names are merged, an annotation repeated word
  for word with the same times under two names is kept once (reported), and the video lasts
  the longest container's ``num_segments``. Lists are matched on the video id; a data file's
  videos outside its list are left out and a listed video missing from its data file is
  reported. The published moment counts are checked against the moments *kept*.
- A moment ``[s, e]`` spans seconds ``5 s`` to ``5 (e + 1)``; a video lasts
  ``5 * num_segments`` s. The JSON holds no video lengths, so nothing is clipped: a video
  whose last segment is shorter than 5 s (the annotated videos were cut at 30 s) ends
  earlier than its stated duration. A moment's time is the most frequent annotator pair,
  ties going to the first annotator's, as TVR's ``get_didemo_agreed_ts``
  (jayleicn/TVRetrieval) takes it; the other annotators' pairs are not kept.
  LocalizingMoments itself evaluates against every annotator's pair and trains on a
  random one, which one caption time per description cannot hold.
- Descriptions are kept as written, without surrounding whitespace.
- Default ``--fuse-paragraph``: a video's descriptions joined into one caption (kind
  ``paragraph``, the whole video), ordered by moment start, end, annotation id, as CE
  evaluates DiDeMo; ``--per-moment`` keeps one caption per description (kind ``caption``).
"""

from __future__ import annotations

from collections import Counter
from pathlib import Path
from typing import Any

from .build import CaptionRows, RawDataset, read_id_list, read_json
from .build_report import BuildError, Reporter

SEGMENT_SECONDS = 5.0
PARTS = {"train": "train", "val": "validation", "test": "test"}
CE_LIST_VIDEOS = {"train": 8392, "validation": 1065, "test": 1004}
PUBLISHED_MOMENTS = {"train": 33005, "validation": 4180, "test": 4021}
FIELDS = ("annotation_id", "description", "times", "video", "num_segments")


def add_arguments(parser) -> None:
    mode = parser.add_mutually_exclusive_group()
    mode.add_argument(
        "--fuse-paragraph",
        dest="per_moment",
        action="store_false",
        help="one paragraph caption per video, as CE (default)",
    )
    mode.add_argument(
        "--per-moment",
        dest="per_moment",
        action="store_true",
        help="one caption per moment description",
    )
    parser.add_argument(
        "--lists",
        type=Path,
        default=None,
        help="folder of train_list.txt/val_list.txt/test_list.txt (default: SRC)",
    )
    parser.set_defaults(per_moment=False)


def _consensus(pairs):
    """The most frequent ``(s, e)`` (TVR's ``get_didemo_agreed_ts``); ties go to the
    earliest annotator (``Counter`` keeps insertion order)."""
    return Counter(pairs).most_common(1)[0][0]


def parse_file(path: Path, reporter: Reporter, seen_ids: set):
    """Moments of one data file: ``{file_name: {"segments": n, "moments": [...]}}``."""
    data = read_json(path, "it as JSON")
    if not isinstance(data, list):
        raise BuildError(f"{path}: expected a JSON list of annotations")
    videos: dict[str, Any] = {}
    for index, item in enumerate(data):
        where = f"entry {index}"
        missing = [f for f in FIELDS if not isinstance(item, dict) or f not in item]
        if missing:
            reporter.problem("missing field", path, where, missing)
            continue
        where = f"entry {index} (annotation_id {item['annotation_id']})"
        if item["annotation_id"] in seen_ids:
            reporter.problem("duplicate annotation_id", path, where, item["annotation_id"])
            continue
        text, segments = str(item["description"]).strip(), item["num_segments"]
        if item["description"] is None or not text:
            reporter.problem("empty description", path, where, item["description"])
            continue
        if not isinstance(segments, int) or segments < 1:
            reporter.problem("bad num_segments", path, where, segments)
            continue
        pairs = []
        for pair in item["times"] if isinstance(item["times"], list) else [item["times"]]:
            ok = isinstance(pair, list) and len(pair) == 2 and all(isinstance(t, int) for t in pair)
            if not ok or not 0 <= pair[0] <= pair[1] < segments:
                reporter.problem(
                    "time outside the video",
                    path,
                    where,
                    pair,
                    f"need 0 <= s <= e < num_segments ({segments}); this annotator is dropped",
                )
                continue
            pairs.append(tuple(pair))
        if not pairs:
            continue
        video = videos.setdefault(
            item["video"], {"segments": segments, "moments": [], "annotations": []}
        )
        if video["segments"] != segments:
            reporter.problem(
                "num_segments differs between annotations",
                path,
                where,
                segments,
                f"the video's first annotation says {video['segments']}",
            )
            continue
        seen_ids.add(item["annotation_id"])
        s, e = _consensus(pairs)
        video["moments"].append(
            (s * SEGMENT_SECONDS, (e + 1) * SEGMENT_SECONDS, item["annotation_id"], text)
        )
        video["annotations"].append((text, sorted(pairs), where))
    return videos


def merge_containers(path: Path, parsed: dict, reporter: Reporter) -> dict:
    """``{video_id: {"segments": longest, "moments": [...], "names": [...]}}`` over file names."""
    merged: dict[str, Any] = {}
    for name, video in parsed.items():
        into = merged.setdefault(
            name.split(".")[0], {"segments": 0, "moments": [], "names": [], "seen": set()}
        )
        into["names"].append(name)
        into["segments"] = max(into["segments"], video["segments"])
        moments = zip(video["moments"], video["annotations"], strict=False)
        for moment, (text, pairs, where) in moments:
            key = (text, tuple(pairs))
            if key in into["seen"]:
                reporter.problem(
                    "same annotation under two file names of a video",
                    path,
                    where,
                    name,
                    "kept once",
                )
                continue
            into["seen"].add(key)
            into["moments"].append(moment)
    return merged


def read(args, reporter: Reporter) -> RawDataset:
    src = Path(args.src)
    list_dir = Path(args.lists) if args.lists else src
    files = {part: src / f"{part}_data.json" for part in PARTS}
    if not any(p.is_file() for p in files.values()):
        raise BuildError(f"{src}: no train_data.json, val_data.json or test_data.json")
    videos: dict[str, Any] = {}
    captions = CaptionRows()
    seen_ids: set[str] = set()
    expected, got, method = {}, {}, []
    for part, path in files.items():
        split = PARTS[part]
        if not path.is_file():
            reporter.note(f"{path.name} not found: the dataset has no {split} split")
            continue
        parsed = merge_containers(path, parse_file(path, reporter, seen_ids), reporter)
        expected[f"{path.name} moments kept"] = PUBLISHED_MOMENTS[split]
        list_path = list_dir / f"{part}_list.txt"
        if list_path.is_file():
            lines = {name.split(".")[0]: number
                     for name, number in read_id_list(list_path, reporter).items()}
            for video_id, number in lines.items():
                if video_id not in parsed:
                    reporter.problem(
                        "unknown video id in split list",
                        list_path,
                        f"line {number}",
                        video_id,
                        f"no file name of {path.name} starts with it",
                    )
            outside = len(set(parsed) - set(lines))
            if outside:
                reporter.note(
                    f"{outside} video(s) of {path.name} are not in {list_path.name}: left out"
                )
            ids = [v for v in lines if v in parsed]  # the ids are unique keys
            expected[f"{split} videos (CE list)"] = CE_LIST_VIDEOS[split]
            got[f"{split} videos (CE list)"] = len(ids)
        else:
            reporter.note(f"no {list_path.name}: every video of {path.name} is used")
            ids = list(parsed)
        several = sum(len(parsed[v]["names"]) > 1 for v in ids)
        if several:
            reporter.note(
                f"{several} video(s) of {path.name} have annotations under several file names "
                "(containers): merged"
            )
        kept = 0
        for video_id in ids:
            if video_id in videos:
                reporter.problem(
                    "video in two data files",
                    path,
                    f"video {video_id!r}",
                    video_id,
                    f"already in the {videos[video_id]['split']} split; left out here",
                )
                continue
            video = parsed[video_id]
            duration = video["segments"] * SEGMENT_SECONDS
            videos[video_id] = {"split": split, "duration": duration}
            moments = sorted(video["moments"])
            kept += len(moments)
            if args.per_moment:
                for start, end, annotation_id, text in moments:
                    captions.add(str(annotation_id), video_id, "en", text, start, end)
            else:
                paragraph = " ".join(m[3] for m in moments)
                captions.add(
                    f"{video_id}/paragraph", video_id, "en", paragraph, 0.0, duration, "paragraph"
                )
        got[f"{path.name} moments kept"] = kept
    reporter.check_counts("DiDeMo", expected, got)
    method.append(
        "captions: "
        + (
            "one per moment description (consensus time of the annotators)"
            if args.per_moment
            else "each video's descriptions fused into one paragraph, as CE does"
        )
    )
    method.append(
        "moment [s, e] in 5-s segments -> seconds [5s, 5(e+1)]; duration = 5 * num_segments"
    )
    return RawDataset(
        "didemo",
        videos,
        captions,
        method=method,
        extra={"captions": "per_moment" if args.per_moment else "paragraph"},
    )
