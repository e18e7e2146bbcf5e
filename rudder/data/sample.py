"""The embedded sample dataset: a deterministic, SIMULATED RUDDER-like corpus.

Real RUDDER data cannot be downloaded here, so :func:`build_sample` writes a corpus in the
dataset layout (:mod:`rudder.data.layout`) that exercises every code path: 800 toy-making
videos, each a *recipe* (a toy type from :data:`rudder.data.sample_text.TOYS`, 3-6 materials,
2-5 actions); 5-8 timed captions per video and language (listing captions name the materials,
describing captions one or two steps), in Marathi, Hindi and English for every video and in
Tamil and Telugu (marked machine-translated, as RUDDER's were) for a subset; RUDDER-style
manual noun/verb annotations; a simulated manual ``relations`` table; and expert features that
carry noisy evidence of each video's materials and actions with RUDDER's audio availability.

The same :data:`SAMPLE_VERSION` and :data:`SAMPLE_SEED` always give the same tables, and
byte-identical parquet files under one pyarrow version (a file's footer names the pyarrow
that wrote it). Any change to the tables (including :data:`FEATURE_NOISE`) bumps the
version; the data is never tuned to favour a loss. ``python -m rudder.data.sample --out
DIR`` writes a copy.
"""

from __future__ import annotations

import itertools
import os
from pathlib import Path

import numpy as np
import pyarrow as pa

from rudder.atomic import staged_folder
from rudder.data.card import Card
from rudder.data.layout import (
    CAPTIONS_SCHEMA,
    NOUN_VERB_COLUMNS,
    DatasetMeta,
    ExpertInfo,
    LayoutError,
)
from rudder.data.layout_writer import DatasetWriter
from rudder.data.sample_text import (
    ACTION_ARGS,
    ACTIONS,
    CARD_DESCRIPTION,
    CARD_HOW_BUILT,
    CARD_TITLE,
    LANGS,
    MATERIALS,
    NOUNS,
    TOYS,
    VERBS,
    render_describing,
    render_listing,
)
from rudder.labels import PairLabel
from rudder.paths import cache_dir

SAMPLE_VERSION = "2.0"
SAMPLE_SEED = 20240611
# 800 videos split 60/20/20, so that validation matches test in size (enough to select
# hyper-parameters on); the generator is not tuned toward any loss.
NUM_VIDEOS = 800
# The difficulty knob: std of the Gaussian noise added to every feature dimension, whose
# signal part has unit variance (a random projection of a unit-norm evidence vector).
FEATURE_NOISE = 2.0
DISTRACTOR_WEIGHT = 0.5  # weight of the distractor concepts mixed into each evidence vector
INSTRUMENT_RATE = 0.7  # chance that a step names its instrument (scissors, glue, pin, ...)
SPLIT_FRACTIONS = {"train": 0.6, "validation": 0.2, "test": 0.2}
AUDIO_LANGS = ("mr", "hi", "ta", "te")
EXPERTS = {"scene": ExpertInfo(128), "object": ExpertInfo(256), "action": ExpertInfo(128)}
EXPERTS |= {f"audio@{lang}": ExpertInfo(64, variable_length=True) for lang in AUDIO_LANGS}
VISUAL_MISSING_RATE = 0.03  # scene/object/action each missing for 3% of videos
# Audio in Marathi for every video; (hi, ta, te) availability combinations with probabilities
# giving RUDDER's rates: hi 54%, ta 27%, te 23%, all four languages 21%.
AUDIO_COMBOS = {(1, 1, 1): 0.21, (1, 1, 0): 0.04, (1, 0, 1): 0.01, (0, 1, 1): 0.01,
                (1, 0, 0): 0.28, (0, 1, 0): 0.01, (0, 0, 1): 0.00, (0, 0, 0): 0.44}
CAPTION_LANG_RATES = {"mr": 1.0, "hi": 1.0, "en": 1.0, "ta": 0.4, "te": 0.4}
MACHINE_TRANSLATED = {"ta", "te"}
NUM_RELATIONS = {"translation": 900, "same_video": 1800, "same_toy": 1500, "random": 1800}
_STRINGS = pa.list_(pa.string())
CAPTION_COLUMNS = pa.schema([*CAPTIONS_SCHEMA, *(pa.field(c, _STRINGS) for c in NOUN_VERB_COLUMNS)])
ANNOTATORS = ("annotator_1", "annotator_2", "annotator_3", "annotator_4")
LICENSE = "mit"


def _rng(*stream: int) -> np.random.Generator:
    """An independent generator per component, so one component never shifts another."""
    return np.random.default_rng([SAMPLE_SEED, *stream])


def exact_assignment(rng: np.random.Generator, n: int, probs) -> np.ndarray:
    """Category per item: counts by largest-remainder (Hamilton) apportionment of ``n * p``.

    Shuffled; exact counts (rather than i.i.d. draws) keep the availability rates on target.
    """
    probs = np.asarray(probs, dtype=float)
    raw = n * probs / probs.sum()
    counts = np.floor(raw).astype(int)
    counts[np.argsort(-(raw - counts), kind="stable")[: n - counts.sum()]] += 1
    return rng.permutation(np.repeat(np.arange(len(probs)), counts))


def _sample_recipe(rng: np.random.Generator, toy: str) -> tuple[list, list]:
    """Steps ``(action, x, y, i)`` of one video and its caption plan (segments)."""
    roles, script = TOYS[toy]
    steps_spec = [s.split() for s in script.split("; ")]
    while True:
        fillers, used = {}, set()
        for role, pool in roles.items():
            options = [m for m in pool.split() if m not in used]
            if not options:
                break
            fillers[role] = options[rng.integers(len(options))]
            used.add(fillers[role])
        else:
            size = rng.integers(3, len(steps_spec) + 1)
            chosen = np.sort(rng.choice(len(steps_spec), size, replace=False))
            steps = []
            for j in chosen:
                action, *args = steps_spec[j]
                slot = dict(zip(ACTION_ARGS[action][1:], args[1:], strict=False))
                y = slot.get("y")
                i = slot.get("i") if "i" in slot and rng.random() < INSTRUMENT_RATE else None
                steps.append(("v:" + action, "n:" + fillers[args[0]],
                              "n:" + fillers[y] if y else None, "n:" + fillers[i] if i else None))
            materials = list(dict.fromkeys(m for s in steps for m in s[1:] if m))
            actions = {s[0] for s in steps}
            target = rng.integers(5, 9)  # captions per video and language
            plans = [(k, target - k) for k in (1, 2) if k == 1 or len(materials) >= 4]
            plans = [(a, b) for a, b in plans if -(-len(steps) // 2) <= b <= len(steps)]
            if 3 <= len(materials) <= 6 and 2 <= len(actions) <= 5 and plans:
                return steps, _plan_segments(rng, steps, materials, plans[rng.integers(len(plans))])


def _plan_segments(rng, steps, materials, plan) -> list[dict]:
    """Listing segments (materials in order of use), then describing ones of 1-2 steps."""
    n_list, n_desc = plan
    half = -(-len(materials) // 2)
    groups = [materials] if n_list == 1 else [materials[:half], materials[half:]]
    segments = [{"kind": "listing", "materials": g, "nouns": list(g), "verbs": [],
                 "variant": int(rng.integers(3)) if k == 0 else 3} for k, g in enumerate(groups)]
    sizes = np.ones(n_desc, dtype=int)
    sizes[rng.choice(n_desc, len(steps) - n_desc, replace=False)] += 1
    bounds = np.concatenate([[0], np.cumsum(sizes)])
    for a, b in itertools.pairwise(bounds):
        part = steps[a:b]
        segments.append({"kind": "describing", "steps": part, "prefix": int(rng.integers(4)),
                         "nouns": list(dict.fromkeys(m for s in part for m in s[1:] if m)),
                         "verbs": list(dict.fromkeys(s[0] for s in part))})
    return segments


def _videos(rng) -> list[dict]:
    """Per video: id, toy, duration, split, recipe, segments with times, languages, experts."""
    toys = list(TOYS)
    toy_of = exact_assignment(rng, NUM_VIDEOS, np.ones(len(toys)))
    split_of = exact_assignment(rng, NUM_VIDEOS, list(SPLIT_FRACTIONS.values()))
    audio = exact_assignment(rng, NUM_VIDEOS, list(AUDIO_COMBOS.values()))
    combos = list(AUDIO_COMBOS)
    missing = {e: exact_assignment(rng, NUM_VIDEOS, [1 - VISUAL_MISSING_RATE, VISUAL_MISSING_RATE])
               for e in ("scene", "object", "action")}
    has_lang = {lang: exact_assignment(rng, NUM_VIDEOS, [1 - rate, rate])
                for lang, rate in CAPTION_LANG_RATES.items()}
    videos = []
    for v in range(NUM_VIDEOS):
        toy = toys[toy_of[v]]
        steps, segments = _sample_recipe(rng, toy)
        duration = round(float(rng.uniform(60.0, 300.0)), 1)
        share = rng.dirichlet(np.full(len(segments), 3.0))
        lead = rng.uniform(0.0, 0.05) * duration
        starts = lead + np.concatenate([[0.0], np.cumsum(share)[:-1]]) * 0.94 * duration
        ends = starts + share * 0.94 * duration * rng.uniform(0.8, 1.0, len(segments))
        for segment, start, end in zip(segments, starts, ends, strict=True):
            segment["start"], segment["end"] = round(float(start), 2), round(float(end), 2)
        experts = [e for e in ("scene", "object", "action") if missing[e][v] == 0] + ["audio@mr"]
        experts += [f"audio@{lang}"
                    for lang, on in zip(("hi", "ta", "te"), combos[audio[v]], strict=True) if on]
        videos.append({"video_id": f"v{v:04d}", "toy": toy, "duration": duration,
                       "split": list(SPLIT_FRACTIONS)[split_of[v]], "steps": steps,
                       "segments": segments,
                       "langs": [lang for lang in LANGS if has_lang[lang][v] == 1],
                       "experts": sorted(experts)})
    return videos


def _caption_rows(videos) -> dict[str, list]:
    columns: dict[str, list] = {k: [] for k in CAPTION_COLUMNS.names}
    for video in videos:
        for lang in video["langs"]:
            for k, segment in enumerate(video["segments"]):
                nouns, verbs = segment["nouns"], segment["verbs"]
                text = (render_listing(lang, segment["materials"], segment["variant"])
                        if segment["kind"] == "listing"
                        else render_describing(lang, segment["steps"], segment["prefix"]))
                row = {"caption_id": f"{video['video_id']}-{lang}-{k:02d}",
                       "video_id": video["video_id"], "lang": lang, "text": text,
                       "start": segment["start"], "end": segment["end"], "kind": segment["kind"],
                       "machine_translated": lang in MACHINE_TRANSLATED,
                       "nouns": [NOUNS[c][lang]["lemma"] for c in nouns],
                       "verbs": [VERBS[c][lang]["lemma"] for c in verbs],
                       "noun_classes": nouns, "verb_classes": verbs}
                for key, value in row.items():
                    columns[key].append(value)
    return columns


def unit_rows(matrix: np.ndarray) -> np.ndarray:
    """Each row scaled to unit L2 norm."""
    return matrix / np.linalg.norm(matrix, axis=-1, keepdims=True)


def with_distractors(rng, hot: np.ndarray, count: int) -> np.ndarray:
    """Add ``count`` random absent concepts (or classes) per row at DISTRACTOR_WEIGHT (detector
    confusions)."""
    out = hot.astype(float)
    for row in range(len(hot)):
        absent = np.flatnonzero(hot[row] == 0)
        out[row, rng.choice(absent, count, replace=False)] = DISTRACTOR_WEIGHT
    return out


def _features(videos, noise: float) -> dict[str, tuple[list[str], list]]:
    """Per expert: a fixed random projection of a unit evidence vector, plus N(0, noise²).

    object sees the recipe's materials, action its actions, scene a toy-type mixture, and
    audio@<lang> one frame per narrated segment (that segment's materials and actions) plus
    distractor frames; each audio language has its own projection.
    """
    index = {c: k for k, c in enumerate(MATERIALS + ACTIONS)}
    toys = list(TOYS)
    n, nm = len(videos), len(MATERIALS)
    hot = np.zeros((n, len(index)))
    for v, video in enumerate(videos):
        for step in video["steps"]:
            hot[v, [index[c] for c in step if c]] = 1.0
    proj_rng = _rng(1)
    evidence = {
        "object": with_distractors(_rng(2), hot[:, :nm], 2),
        "action": with_distractors(_rng(3), hot[:, nm:], 1),
        "scene": np.eye(len(toys))[[toys.index(v["toy"]) for v in videos]] + _rng(4).dirichlet(
            np.full(len(toys), 0.3), n),
    }
    out = {}
    for k, expert in enumerate(("scene", "object", "action")):
        weights = proj_rng.standard_normal((EXPERTS[expert].dim, evidence[expert].shape[1]))
        noise_draw = _rng(10 + k).standard_normal((n, weights.shape[0]))
        feats = unit_rows(evidence[expert]) @ weights.T + noise * noise_draw
        keep = [v for v in range(n) if expert in videos[v]["experts"]]
        out[expert] = ([videos[v]["video_id"] for v in keep], feats[keep].astype(np.float32))
    segment_hot, segment_cdf = [], []
    for video in videos:
        rows = np.zeros((len(video["segments"]), len(index)))
        for s, segment in enumerate(video["segments"]):
            rows[s, [index[c] for c in segment["nouns"] + segment["verbs"]]] = 1.0
        share = np.cumsum([s["end"] - s["start"] for s in video["segments"]])
        segment_hot.append(rows)
        segment_cdf.append(share / share[-1])
    for k, lang in enumerate(AUDIO_LANGS):
        expert, rng = f"audio@{lang}", _rng(20 + k)
        weights = proj_rng.standard_normal((EXPERTS[expert].dim, len(index)))
        ids, arrays = [], []
        for video, rows, cdf in zip(videos, segment_hot, segment_cdf, strict=True):
            frames = int(rng.integers(4, 13))
            # frames in time order, each narrating a segment drawn in proportion to its length
            picks = np.searchsorted(cdf, np.sort(rng.random(frames)), side="right")
            picks = np.minimum(picks, len(cdf) - 1)
            vectors = rows[picks]
            distract = rng.random(frames) < 0.25
            vectors[distract] = 0.0
            vectors[distract, rng.integers(len(index), size=int(distract.sum()))] = 1.0
            array = unit_rows(vectors) @ weights.T
            array += noise * rng.standard_normal((frames, weights.shape[0]))
            if expert in video["experts"]:
                ids.append(video["video_id"])
                arrays.append(array.astype(np.float32))
        out[expert] = (ids, arrays)
    return out


def _group_partners(rng, key: np.ndarray, size: int) -> tuple[np.ndarray, np.ndarray]:
    """``size`` random pairs of positions into ``key`` with equal keys (possibly the same one)."""
    order = np.argsort(key, kind="stable")
    uniq, start, count = np.unique(key[order], return_index=True, return_counts=True)
    ia = rng.integers(len(key), size=size)
    group = np.searchsorted(uniq, key[ia])
    return ia, order[start[group] + (rng.random(size) * count[group]).astype(int)]


def relation_labels(same_video, same_segment, kind_a, kind_b, seg_a, seg_b, nouns_a, nouns_b,
                    verbs_a, verbs_b) -> np.ndarray:
    """The simulated annotators' label of caption pairs from the generator's truth (vectorised).

    The four categories are RUDDER's manual relations ("Pair labels", docs/architecture.md); the
    rules that assign them from the recipe are this generator's own:

    2 positive: the same segment of a video (translations) or identical noun and verb classes;
    3 description: same video and a describing caption that applies materials of the listing
    caption, or the next describing step sharing a material or action (a continuation);
    1 partial: any shared material or action; 0 negative otherwise. ``nouns_*``/``verbs_*``
    are boolean multi-hot rows; the first matching rule wins.
    """
    share_n, share_v = (nouns_a & nouns_b).any(1), (verbs_a & verbs_b).any(1)
    identical = (nouns_a == nouns_b).all(1) & (verbs_a == verbs_b).all(1)
    applies = same_video & (kind_a != kind_b) & share_n
    continues = (same_video & (kind_a == "describing") & (kind_b == "describing")
                 & (np.abs(seg_a - seg_b) == 1) & (share_n | share_v))
    rules = [same_segment | identical, applies | continues, share_n | share_v]
    chosen = [PairLabel.POSITIVE, PairLabel.DESCRIPTION, PairLabel.PARTIAL]
    return np.select(rules, chosen, PairLabel.NEGATIVE).astype(np.int8)


def _relations(captions: dict, videos) -> pa.Table:
    """A few thousand labelled pairs of training captions (mr/hi/en), one annotator each."""
    rng = _rng(30)
    video_of = {v["video_id"]: k for k, v in enumerate(videos)}
    cap_video = np.array([video_of[v] for v in captions["video_id"]])
    seg = np.array([int(c.rsplit("-", 1)[1]) for c in captions["caption_id"]])
    kind = np.array(captions["kind"])
    toy = np.array([list(TOYS).index(videos[v]["toy"]) for v in cap_video])
    train = np.array([videos[v]["split"] == "train" for v in cap_video])
    pool = np.flatnonzero(train & np.isin(captions["lang"], ["mr", "hi", "en"]))
    keys = {"translation": cap_video[pool] * 100 + seg[pool], "same_video": cap_video[pool],
            "same_toy": toy[pool], "random": np.zeros(len(pool), dtype=int)}
    pairs: list[tuple[np.ndarray, np.ndarray, np.ndarray]] = []
    for name, wanted in NUM_RELATIONS.items():
        ia, ib = _group_partners(rng, keys[name], 4 * wanted)
        a, b = pool[ia], pool[ib]
        other_video = cap_video[a] != cap_video[b]
        ok = {"translation": a != b, "same_video": seg[a] != seg[b]}.get(name, other_video)
        a, b = a[ok], b[ok]
        pair_key = np.minimum(a, b) * len(seg) + np.maximum(a, b)
        first = np.sort(np.unique(pair_key, return_index=True)[1])
        taken = np.concatenate([p[2] for p in pairs]) if pairs else np.zeros(0, dtype=int)
        first = first[~np.isin(pair_key[first], taken)][:wanted]
        pairs.append((a[first], b[first], pair_key[first]))
    a = np.concatenate([p[0] for p in pairs])
    b = np.concatenate([p[1] for p in pairs])
    nouns = _multi_hot(captions["noun_classes"], MATERIALS)
    verbs = _multi_hot(captions["verb_classes"], ACTIONS)
    same_video = cap_video[a] == cap_video[b]
    labels = relation_labels(same_video, same_video & (seg[a] == seg[b]), kind[a], kind[b],
                             seg[a], seg[b], nouns[a], nouns[b], verbs[a], verbs[b])
    ids = np.array(captions["caption_id"])
    return pa.table({"caption_id_a": ids[a], "caption_id_b": ids[b],
                     "label": pa.array(labels, pa.int8()),
                     "annotator": np.array(ANNOTATORS)[rng.integers(len(ANNOTATORS), size=len(a))]})


def _multi_hot(class_lists, vocabulary) -> np.ndarray:
    column = {c: k for k, c in enumerate(vocabulary)}
    hot = np.zeros((len(class_lists), len(vocabulary)), dtype=bool)
    rows = np.repeat(np.arange(len(class_lists)), [len(c) for c in class_lists])
    hot[rows, [column[c] for cs in class_lists for c in cs]] = True
    return hot


def _card() -> Card:
    fields = {"version": SAMPLE_VERSION, "seed": SAMPLE_SEED, "license": LICENSE,
              "videos": NUM_VIDEOS, "toys": len(TOYS), "materials": len(MATERIALS),
              "actions": len(ACTIONS), "ta": f"{CAPTION_LANG_RATES['ta']:.0%}",
              "te": f"{CAPTION_LANG_RATES['te']:.0%}", "noise": FEATURE_NOISE,
              "distractor": DISTRACTOR_WEIGHT, "missing": f"{VISUAL_MISSING_RATE:.0%}",
              "audio": ", ".join(f"{k}: {v:.0%}" for k, v in AUDIO_COMBOS.items()),
              "splits": "/".join(f"{100 * v:.0f}" for v in SPLIT_FRACTIONS.values())}
    return Card(CARD_TITLE, CARD_DESCRIPTION.format(**fields), license=LICENSE,
                how_built=CARD_HOW_BUILT.format(**fields))


def build_sample(out_dir, overwrite: bool = False) -> Path:
    """Write the sample dataset to ``out_dir`` (atomically; see :class:`DatasetWriter`)."""
    meta = DatasetMeta(name="rudder-sample", version=SAMPLE_VERSION, languages=list(LANGS),
                       experts=dict(EXPERTS), simulated=True,
                       extra={"generator_version": SAMPLE_VERSION, "seed": SAMPLE_SEED,
                              "feature_noise": FEATURE_NOISE})
    with DatasetWriter(out_dir, meta, _card(), overwrite=overwrite) as writer:
        videos = _videos(_rng(0))
        captions = _caption_rows(videos)
        columns = ("video_id", "duration", "split", "experts")
        writer.write_videos(pa.table({k: [v[k] for v in videos] for k in columns}))
        writer.write_captions(pa.table(captions, schema=CAPTION_COLUMNS))
        for expert, (ids, features) in sorted(_features(videos, FEATURE_NOISE).items()):
            writer.write_expert(expert, [(ids, features)])
        writer.write_relations(_relations(captions, videos))
    return Path(out_dir)


def cache_root() -> Path:
    """``$RUDDER_CACHE``, or ``~/.cache/rudder``."""
    return cache_dir()


def sample_dataset_path() -> Path:
    """The sample dataset folder ``<cache>/sample-v<version>``, built once if absent.

    Builds in a staging folder beside it (:func:`rudder.atomic.staged_folder`) and renames
    the result into place, never over a copy another process finished first (that copy is
    used): concurrent callers never see a half-written dataset.
    """
    target = cache_root() / f"sample-v{SAMPLE_VERSION}"
    if (target / "rudder.json").is_file():
        return target
    with staged_folder(target) as stage:
        built = build_sample(stage / target.name)
        try:
            os.rename(built, target)  # not os.replace: fails when another process won the race
        except OSError as error:
            if not (target / "rudder.json").is_file():
                raise LayoutError(
                    f"cannot create the sample dataset at {target} ({error}); remove that folder "
                    "or set RUDDER_CACHE to a writable directory"
                ) from error
    return target


def build_parser():
    from rudder.cli import ArgumentParser

    parser = ArgumentParser(
        prog="python -m rudder.data.sample",
        description="Write rudder's SIMULATED RUDDER-like sample dataset (deterministic; "
        f"generator version {SAMPLE_VERSION}, seed {SAMPLE_SEED}).",
    )
    parser.add_argument("--out", type=Path, help="folder to write; default: the cache folder "
                        "($RUDDER_CACHE or ~/.cache/rudder)/sample-v<version>, built if absent")
    parser.add_argument("--overwrite", action="store_true", help="replace an existing --out folder")
    return parser


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        if args.out:
            path = build_sample(args.out, overwrite=args.overwrite)
        else:
            path = sample_dataset_path()
    except LayoutError as error:
        parser.exit(2, f"error: {error}\n")
    print(path)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
