"""The EPIC relevance benchmark: real EPIC-KITCHENS-100 narrations and their verb/noun
classes, with SIMULATED video features generated from those classes.

The relevance losses (RAN, RANP, the relevance margin, adaptive MI-MM, SMS) learn from
R = 0.5 (IoU of the verb classes + IoU of the noun classes). On the embedded sample few
in-batch pairs reach the thresholds they use (91% of its videos have no verb at rho 0.25),
so this benchmark takes its text and classes from the real EPIC-KITCHENS-100
multi-instance retrieval sentences (``EPIC_100_retrieval_train_sentence.csv``: 15,989
distinct narrations with their gold ``verb_class`` and ``noun_classes``), where 8.4% of
random pairs of narrations reach R >= 0.4.

What it holds: :data:`NUM_CLIPS` narrations drawn uniformly without replacement (seed
:data:`EPIC_SEED`), one clip per narration (EPIC's MIR convention: a clip has one caption,
so a caption's relevance to its own clip is 1), split 60/20/20 by clip. Captions are the
narrations as written (``lang`` en), with ``verbs``/``nouns`` and the class columns
``verb_classes`` = [``v:<verb key>``] and ``noun_classes`` = [``n:<noun key>``, ...] (keys
from ``EPIC_100_verb_classes.csv`` / ``EPIC_100_noun_classes.csv``). The features are
generated as :mod:`rudder.data.sample` generates them, with its constants
(:data:`rudder.data.sample.FEATURE_NOISE`, :data:`rudder.data.sample.DISTRACTOR_WEIGHT`),
not tuned to any loss: a fixed random projection of a unit evidence vector plus Gaussian
noise of std ``FEATURE_NOISE``; ``object`` sees the clip's noun classes plus 2 distractor
nouns, ``action`` its verb class plus 1 distractor verb, ``scene`` the participant's
kitchen (P01..P37) mixed with a Dirichlet(0.3) draw over kitchens. There is no audio. Clip
durations are not in the source file: each is drawn uniformly in [1, 10] s.

The same :data:`EPIC_VERSION`, :data:`EPIC_SEED` and source files give the same tables; the
source files' SHA-256 digests are recorded in ``rudder.json`` (``extra.source_sha256``) and
the card, so the dataset's fingerprint changes when the source does. Any change to the
generator bumps :data:`EPIC_VERSION`. ``python -m rudder.data.epic_relevance --epic DIR
--out DIR`` writes it; the EPIC files are CC BY-NC 4.0, and so is the result.
"""

from __future__ import annotations

import ast
import csv
import hashlib
from pathlib import Path

import numpy as np
import pyarrow as pa

from rudder.data.card import Card
from rudder.data.layout import (
    CAPTIONS_SCHEMA,
    NOUN_VERB_COLUMNS,
    DatasetMeta,
    ExpertInfo,
    LayoutError,
)
from rudder.data.layout_writer import DatasetWriter
from rudder.data.sample import (
    DISTRACTOR_WEIGHT,
    FEATURE_NOISE,
    exact_assignment,
    unit_rows,
    with_distractors,
)

EPIC_VERSION = "1.0"
EPIC_SEED = 20250101
NUM_CLIPS = 1000
SPLIT_FRACTIONS = {"train": 0.6, "validation": 0.2, "test": 0.2}
EXPERTS = {"scene": ExpertInfo(128), "object": ExpertInfo(256), "action": ExpertInfo(128)}
SENTENCES = "EPIC_100_retrieval_train_sentence.csv"
NOUN_CLASSES = "EPIC_100_noun_classes.csv"
VERB_CLASSES = "EPIC_100_verb_classes.csv"
SOURCE_FILES = (SENTENCES, NOUN_CLASSES, VERB_CLASSES)
LICENSE = "cc-by-nc-4.0"
_STRINGS = pa.list_(pa.string())
CAPTION_COLUMNS = pa.schema([*CAPTIONS_SCHEMA, *(pa.field(c, _STRINGS) for c in NOUN_VERB_COLUMNS)])

CARD_TITLE = "EPIC relevance benchmark (real EPIC-KITCHENS-100 narrations, simulated features)"
CARD_DESCRIPTION = """\
**The captions and classes are real; the video features are SIMULATED.** {clips} narrations of
the EPIC-KITCHENS-100 multi-instance retrieval sentences (`{sentences}`, SHA-256
{sentences_sha}) with their gold verb and noun classes, one clip per narration, written by
`rudder.data.epic_relevance` (generator version {version}, seed {seed}). The features carry
noisy evidence of each clip's classes, generated as the rudder sample generates them; they are
no EPIC video features, so numbers on this benchmark say how a loss uses graded relevance, not
how it does on EPIC-KITCHENS-100. Licence: CC BY-NC 4.0 (the EPIC-KITCHENS-100 annotations').
"""
CARD_HOW_BUILT = """\
- {clips} of the {sentences_total} distinct narrations, drawn uniformly without replacement
  (seed {seed}); one clip per narration; splits {splits} by clip.
- Captions: the narration as written (English), `verbs`/`nouns` from the source,
  `verb_classes` = `v:<verb class key>`, `noun_classes` = `n:<noun class key>` (class files
  SHA-256 {verbs_sha} / {nouns_sha}). Relevance R = 0.5 (IoU verbs + IoU nouns); a caption's own
  clip has R = 1.
- Features: a fixed random projection of a unit evidence vector plus Gaussian noise (std
  {noise}; distractor classes at weight {distractor}), the rudder sample's constants: `object`
  sees the noun classes and 2 distractor nouns, `action` the verb class and 1 distractor verb,
  `scene` the participant's kitchen mixed with a Dirichlet(0.3) draw. No audio. Durations are
  not in the source file: uniform in [1, 10] s.
"""


def _rng(*stream: int) -> np.random.Generator:
    """An independent generator per component, so one component never shifts another."""
    return np.random.default_rng([EPIC_SEED, *stream])


def _digest(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def _read_csv(path: Path) -> list[dict]:
    try:
        with open(path, newline="", encoding="utf-8") as handle:
            return list(csv.DictReader(handle))
    except (OSError, UnicodeDecodeError, csv.Error) as error:
        raise LayoutError(f"{path}: cannot read the EPIC-KITCHENS-100 file ({error})") from None


def _class_keys(path: Path) -> dict[int, str]:
    """Class id -> key (``id,key,instances,category`` rows)."""
    rows = _read_csv(path)
    try:
        return {int(row["id"]): row["key"] for row in rows}
    except (KeyError, ValueError) as error:
        raise LayoutError(
            f"{path}: expected columns id,key,... with integer ids ({error})") from None


def read_sentences(epic_dir) -> list[dict]:
    """The narrations of ``SENTENCES`` with their parsed classes, in file order: dicts of
    ``narration_id``, ``text``, ``participant``, ``verb``, ``nouns``, ``verb_class`` (key),
    ``noun_classes`` (keys). A malformed row is an error naming its line."""
    epic_dir = Path(epic_dir)
    missing = [name for name in SOURCE_FILES if not (epic_dir / name).is_file()]
    if missing:
        raise LayoutError(f"{epic_dir}: missing EPIC-KITCHENS-100 file(s) {missing}; pass the "
                          "folder holding the MIR sentence and class CSVs")
    verbs, nouns = _class_keys(epic_dir / VERB_CLASSES), _class_keys(epic_dir / NOUN_CLASSES)
    out = []
    for line, row in enumerate(_read_csv(epic_dir / SENTENCES), start=2):
        try:
            noun_ids = ast.literal_eval(row["noun_classes"])
            noun_words = ast.literal_eval(row["nouns"])
            out.append({
                "narration_id": row["narration_id"],
                "text": row["narration"],
                "participant": row["narration_id"].split("_")[0],
                "verb": row["verb"],
                "nouns": [str(n) for n in noun_words],
                "verb_class": verbs[int(row["verb_class"])],
                "noun_classes": list(dict.fromkeys(nouns[int(n)] for n in noun_ids)),
            })
        except (KeyError, ValueError, SyntaxError, TypeError) as error:
            raise LayoutError(
                f"{epic_dir / SENTENCES}, line {line}: expected narration_id,narration,"
                f"verb_class,noun_classes,verb,nouns with known class ids ({error!r})"
            ) from None
    ids = [s["narration_id"] for s in out]
    if len(set(ids)) != len(ids):
        duplicate = next(i for i in ids if ids.count(i) > 1)
        raise LayoutError(f"{epic_dir / SENTENCES}: narration_id {duplicate!r} appears twice")
    if len(out) < NUM_CLIPS:
        raise LayoutError(f"{epic_dir / SENTENCES}: {len(out)} narrations, fewer than the "
                          f"{NUM_CLIPS} the benchmark draws")
    return out


def features(clips: list[dict], verb_keys: list[str], noun_keys: list[str],
             kitchens: list[str], noise: float = FEATURE_NOISE) -> dict[str, np.ndarray]:
    """Per expert, ``(clips, dim)`` float32 features (module docstring)."""
    n = len(clips)
    verb_col = {k: i for i, k in enumerate(verb_keys)}
    noun_col = {k: i for i, k in enumerate(noun_keys)}
    verb_hot = np.zeros((n, len(verb_keys)))
    noun_hot = np.zeros((n, len(noun_keys)))
    for c, clip in enumerate(clips):
        verb_hot[c, verb_col[clip["verb_class"]]] = 1.0
        noun_hot[c, [noun_col[k] for k in clip["noun_classes"]]] = 1.0
    kitchen = np.eye(len(kitchens))[[kitchens.index(c["participant"]) for c in clips]]
    evidence = {
        "scene": kitchen + _rng(4).dirichlet(np.full(len(kitchens), 0.3), n),
        "object": with_distractors(_rng(2), noun_hot, 2),
        "action": with_distractors(_rng(3), verb_hot, 1),
    }
    projection = _rng(1)
    out = {}
    for k, expert in enumerate(("scene", "object", "action")):
        weights = projection.standard_normal((EXPERTS[expert].dim, evidence[expert].shape[1]))
        draw = _rng(10 + k).standard_normal((n, weights.shape[0]))
        out[expert] = (unit_rows(evidence[expert]) @ weights.T + noise * draw).astype(np.float32)
    return out


def build_epic_relevance(epic_dir, out_dir, overwrite: bool = False) -> Path:
    """Write the benchmark to ``out_dir`` from the EPIC-KITCHENS-100 files in ``epic_dir``
    (atomically; see :class:`rudder.data.layout_writer.DatasetWriter`)."""
    epic_dir = Path(epic_dir)
    sentences = read_sentences(epic_dir)
    digests = {name: _digest(epic_dir / name) for name in SOURCE_FILES}
    rng = _rng(0)
    chosen = np.sort(rng.choice(len(sentences), NUM_CLIPS, replace=False))
    clips = [sentences[i] for i in chosen]
    split_of = exact_assignment(rng, NUM_CLIPS, list(SPLIT_FRACTIONS.values()))
    durations = np.round(rng.uniform(1.0, 10.0, NUM_CLIPS), 1)
    verb_keys = list(_class_keys(epic_dir / VERB_CLASSES).values())
    noun_keys = list(_class_keys(epic_dir / NOUN_CLASSES).values())
    kitchens = sorted({s["participant"] for s in sentences})
    ids = [c["narration_id"] for c in clips]  # the clip's id is its narration's
    splits = [list(SPLIT_FRACTIONS)[s] for s in split_of]
    meta = DatasetMeta(
        name="epic-relevance", version=EPIC_VERSION, languages=["en"], experts=dict(EXPERTS),
        simulated=True,
        extra={"generator_version": EPIC_VERSION, "seed": EPIC_SEED, "clips": NUM_CLIPS,
               "feature_noise": FEATURE_NOISE, "source_sha256": digests,
               "simulated_parts": "video features and durations; captions and classes are real"},
    )
    with DatasetWriter(out_dir, meta, _card(len(sentences), digests), overwrite=overwrite) as w:
        w.write_videos(pa.table({
            "video_id": ids, "duration": durations.astype(np.float32), "split": splits,
            "experts": [sorted(EXPERTS)] * NUM_CLIPS,
        }))
        w.write_captions(pa.table({
            "caption_id": [f"{i}-en-00" for i in ids],
            "video_id": ids,
            "lang": ["en"] * NUM_CLIPS,
            "text": [c["text"] for c in clips],
            "start": np.zeros(NUM_CLIPS, dtype=np.float32),
            "end": durations.astype(np.float32),
            "kind": [None] * NUM_CLIPS,
            "machine_translated": [False] * NUM_CLIPS,
            "nouns": [c["nouns"] for c in clips],
            "verbs": [[c["verb"]] for c in clips],
            "noun_classes": [[f"n:{k}" for k in c["noun_classes"]] for c in clips],
            "verb_classes": [[f"v:{c['verb_class']}"] for c in clips],
        }, schema=CAPTION_COLUMNS))
        for expert, values in sorted(features(clips, verb_keys, noun_keys, kitchens).items()):
            w.write_expert(expert, [(ids, values)])
    return Path(out_dir)


def _card(total: int, digests: dict[str, str]) -> Card:
    fields = {"clips": NUM_CLIPS, "sentences": SENTENCES, "sentences_total": total,
              "sentences_sha": digests[SENTENCES][:16], "verbs_sha": digests[VERB_CLASSES][:16],
              "nouns_sha": digests[NOUN_CLASSES][:16], "version": EPIC_VERSION,
              "seed": EPIC_SEED, "noise": FEATURE_NOISE, "distractor": DISTRACTOR_WEIGHT,
              "splits": "/".join(f"{100 * v:.0f}" for v in SPLIT_FRACTIONS.values())}
    return Card(CARD_TITLE, CARD_DESCRIPTION.format(**fields), license=LICENSE,
                how_built=CARD_HOW_BUILT.format(**fields),
                citation="Damen et al., Rescaling Egocentric Vision: Collection, Pipeline and "
                         "Challenges for EPIC-KITCHENS-100, IJCV 2022")


def build_parser():
    from rudder.cli import ArgumentParser

    parser = ArgumentParser(
        prog="python -m rudder.data.epic_relevance",
        description="Write the EPIC relevance benchmark: real EPIC-KITCHENS-100 narrations and "
        f"classes, SIMULATED features (generator version {EPIC_VERSION}, seed {EPIC_SEED}).",
    )
    parser.add_argument("--epic", type=Path, required=True,
                        help=f"folder of {', '.join(SOURCE_FILES)}")
    parser.add_argument("--out", type=Path, required=True, help="dataset folder to write")
    parser.add_argument("--overwrite", action="store_true", help="replace an existing --out folder")
    return parser


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        path = build_epic_relevance(args.epic, args.out, overwrite=args.overwrite)
    except LayoutError as error:
        parser.exit(2, f"error: {error}\n")
    print(path)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
