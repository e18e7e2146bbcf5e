"""Load a dataset split into tensors: expert features with availability masks, captions
as padded token ids per video (video-major, K slots per video), and class multi-hots."""

from __future__ import annotations

import logging
from dataclasses import dataclass

import numpy as np
import pyarrow as pa
import torch

from rudder.data.classes import ClassIndex, video_class_sets
from rudder.data.layout import DatasetFolder, ExpertInfo, LayoutError, parse_expert
from rudder.data.token_store import TokenStore, store_from_encoder, store_from_parquet
from rudder.devices import upload
from rudder.text import Vocabulary, tokenize
from rudder.text.caption_features import CaptionFeatureFile, DatasetTextFeatures

log = logging.getLogger(__name__)


@dataclass
class VideoData:
    """The videos of one split: expert features and availability."""

    split: str
    video_ids: list[str]
    experts: list[str]
    features: dict[str, torch.Tensor]  # fixed (V, D) or variable (V, T, D)
    frame_masks: dict[str, torch.Tensor]  # variable-length experts only: (V, T)
    available: torch.Tensor  # (V, E) bool

    @property
    def num_videos(self) -> int:
        return len(self.video_ids)

    def video_batch(self, index: torch.Tensor, device=None) -> tuple[dict, dict, torch.Tensor]:
        """Features, frame masks and availability of the videos ``index`` on ``device`` (the
        host's own device when None), copied without making the host wait."""
        device = torch.device(device or "cpu")
        features = {e: upload(f[index], device) for e, f in self.features.items()}
        masks = {e: upload(m[index], device) for e, m in self.frame_masks.items()}
        return features, masks, upload(self.available[index], device)


@dataclass
class SplitData(VideoData):
    """One split in tensors: videos plus ``K`` caption slots per video (empty ones masked)."""

    tokens: torch.Tensor  # (V, K, L) long
    token_mask: torch.Tensor  # (V, K, L) bool
    caption_mask: torch.Tensor  # (V, K) bool
    caption_ids: np.ndarray  # (V, K) object, None in empty slots
    caption_langs: np.ndarray  # (V, K) object
    caption_texts: np.ndarray  # (V, K) object
    nouns: torch.Tensor | None  # (V, K, C) bool noun-class multi-hot, None without class columns
    verbs: torch.Tensor | None
    token_features: TokenStore | None = None  # per-token vectors from a frozen text encoder
    labelled: torch.Tensor | None = None  # (V, K) bool: classes given (null: not labelled)

    def video_classes(self, rho: float) -> tuple[torch.Tensor, torch.Tensor]:
        """Noun and verb class sets ``(V, C)`` of each video: the classes in at least ``rho``
        of its valid labelled captions (docs/architecture.md, Relevance); a caption whose class
        columns are null was never labelled, so it does not count."""
        if self.nouns is None or self.verbs is None:
            raise ValueError("video_classes needs the dataset's noun_classes/verb_classes columns "
                             "(add them with `python -m heuristics label`)")
        valid = self.caption_mask if self.labelled is None else self.caption_mask & self.labelled
        owner = torch.nonzero(valid)[:, 0]
        nouns = video_class_sets(self.nouns[valid].float(), owner, self.num_videos, rho)
        return nouns, video_class_sets(self.verbs[valid].float(), owner, self.num_videos, rho)

    def text_input(self, videos: torch.Tensor,
                   slots: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """What the model's text side reads for these captions: token features or ids, and masks."""
        if self.token_features is not None:
            return self.token_features.gather(videos, slots)
        return self.tokens[videos, slots], self.token_mask[videos, slots]


def select_experts(folder: DatasetFolder, experts, audio_langs) -> list[str]:
    """The experts a run uses: the requested list, or all but audio outside ``audio_langs``."""
    if not folder.experts:
        raise LayoutError(
            f"{folder.root}: the dataset has no video features (rudder.json lists no expert), so "
            "there is nothing to train on; build it with `python -m datasets_scripts build "
            "--features DIR`"
        )
    if experts is not None:
        missing = [e for e in experts if e not in folder.meta.experts]
        if missing:
            raise LayoutError(f"{folder.root}: no expert(s) {missing}; available: {folder.experts}")
        return sorted(experts)
    chosen = [e for e in folder.experts if parse_expert(e)[1] in (None, *audio_langs)]
    if not chosen:
        raise LayoutError(
            f"{folder.root}: no expert left after choosing audio languages {audio_langs} "
            f"(the dataset has {folder.experts}); set data.audio_langs or data.experts"
        )
    return chosen


def build_vocabulary(folder: DatasetFolder, langs, min_count: int = 1) -> Vocabulary:
    """Vocabulary of the training captions in the chosen languages."""
    table = folder.captions("train", columns=["text", "lang"]).to_pydict()
    tokens = [tokenize(t, lang) for t, lang in zip(table["text"], table["lang"], strict=True)
              if lang in langs]
    if not tokens:
        raise LayoutError(f"{folder.root}: no training caption in languages {list(langs)}")
    return Vocabulary.build(tokens, min_count=min_count)


def build_class_index(folder: DatasetFolder) -> ClassIndex | None:
    """Concept ids of every split's noun and verb classes; ``None`` if the dataset has none."""
    lists = []
    for split in ("train", "validation", "test"):
        try:
            table = folder.captions(split)
        except LayoutError:
            continue
        if "noun_classes" not in table.column_names:
            return None
        lists += table.column("noun_classes").to_pylist() + table.column("verb_classes").to_pylist()
    return ClassIndex.build(lists)


def caption_ordinals(video_ids) -> np.ndarray:
    """``k`` for the ``k``-th caption of its video (or any grouping key), in table order."""
    codes = np.unique(np.asarray(video_ids), return_inverse=True)[1].reshape(-1)
    order = np.argsort(codes, kind="stable")
    ordinals = np.empty(len(codes), dtype=np.int64)
    ordinals[order] = (np.arange(len(codes))
                       - np.searchsorted(codes[order], codes[order], side="left"))
    return ordinals


def _load_expert(folder, expert, split, row_of, num_videos, max_frames, listed=()):
    """Features of one expert for the split's videos, read from Arrow without Python lists:
    fixed-size features as one (n, D) view of the column's float buffer (a file of several
    row groups is first combined into one buffer, a copy); variable-length ones subsampled
    to ``max_frames`` by index arithmetic before anything else is copied. ``listed``: the
    split's videos whose ``experts`` column names this expert (its file must then exist)."""
    info = folder.meta.experts[expert]
    table = folder.features(expert, split)
    present = np.zeros(num_videos, dtype=bool)
    path = folder.root / "features" / expert / f"{split}.parquet"
    if table is None and listed:
        raise LayoutError(
            f"{path} is missing, but {len(listed)} {split!r} video(s) list expert {expert!r} in "
            f"videos/{split}.parquet (e.g. {listed[0]!r}): restore the file (or rebuild the "
            f"dataset), or leave the expert out of the run with data.experts"
        )
    if table is None:
        shape = (num_videos, 1, info.dim) if info.variable_length else (num_videos, info.dim)
        masks = torch.zeros(num_videos, 1, dtype=torch.bool) if info.variable_length else None
        return torch.zeros(shape), masks, present
    _check_feature_table(table, info, path, f"experts.{expert}.dim")
    ids = table.column("video_id").to_numpy(zero_copy_only=False)
    rows = np.array([row_of.get(v, -1) for v in ids], dtype=np.int64)
    keep = np.flatnonzero(rows >= 0)
    if len(ids) and not len(keep):
        raise LayoutError(f"{path}: none of its {len(ids)} video ids is a {split!r} video (e.g. "
                          f"{ids[0]!r}); it belongs to another split or dataset")
    column = table.column("feature").combine_chunks()
    if info.variable_length:
        offsets = column.offsets.to_numpy()
        frames = _float_matrix(column.flatten(), info.dim)
        if not len(frames):  # only empty videos: index a zero row, masked out below
            frames = np.zeros((1, info.dim), np.float32)
        # Absent videos: no frames.
        starts, ends = np.zeros(num_videos, np.int64), np.zeros(num_videos, np.int64)
        starts[rows[keep]], ends[rows[keep]] = offsets[keep], offsets[keep + 1]
        index, masks_np = _frame_index(starts, ends, max_frames)
        gathered = frames[index]  # the one copy: (videos, frames, D) in split order
        gathered[~masks_np] = 0.0
        feats, masks = torch.from_numpy(gathered), torch.from_numpy(masks_np)
        keep = keep[offsets[keep + 1] > offsets[keep]]  # an empty array means the expert is missing
    else:
        feats, masks = torch.zeros(num_videos, info.dim), None
        feats[torch.from_numpy(rows[keep])] = torch.from_numpy(
            _float_matrix(column, info.dim)[keep])
    # One sum is finite exactly when every value is (barring float32 overflow, which the exact
    # check below then clears): ~10x cheaper than an elementwise test of the whole matrix.
    if not torch.isfinite(feats.sum()):
        finite_rows = torch.isfinite(feats.reshape(num_videos, -1)).all(1)
        if not finite_rows.all():
            bad = int(torch.nonzero(~finite_rows)[0])
            raise LayoutError(f"{path}: video {list(row_of)[bad]!r} has NaN or inf values; "
                              "fix its features or drop its row (the expert is then missing "
                              "for it)")
    present[rows[keep]] = True
    return feats, masks, present


def _check_feature_table(table, info: ExpertInfo, path, declared: str) -> None:
    """A features table has string ``video_id`` keys and a ``feature`` column of exactly the
    type ``rudder.json`` declares, with no null row: a wider vector would otherwise be read
    as several rows of other videos' values."""
    if "video_id" not in table.column_names or "feature" not in table.column_names:
        raise LayoutError(f"{path}: expected columns video_id and feature, got "
                          f"{table.column_names}; rebuild the dataset folder")
    if not pa.types.is_string(table.schema.field("video_id").type):
        raise LayoutError(f"{path}: video_id is {table.schema.field('video_id').type}, not "
                          "string; rebuild the dataset folder")
    check_feature_type(table.schema.field("feature").type, info, path, declared)
    if table.column("feature").null_count:
        raise LayoutError(f"{path}: {table.column('feature').null_count} feature row(s) are "
                          "null; drop those rows (the expert is then missing there)")


def check_feature_type(found: pa.DataType, info: ExpertInfo, path, declared: str) -> None:
    """Refuse a ``feature`` column whose type is not the one ``rudder.json`` declares."""
    if found != info.arrow_type:
        raise LayoutError(f"{path}: feature is {found}, but rudder.json declares {declared} = "
                          f"{info.dim} ({info.arrow_type}); rebuild the features or correct "
                          f"{declared} in rudder.json")


def _float_matrix(fixed_size_lists, dim: int) -> np.ndarray:
    """An Arrow FixedSizeList<float32, dim> array as an (n, dim) numpy view (no copy)."""
    return fixed_size_lists.flatten().to_numpy(zero_copy_only=False).reshape(-1, dim)


def _frame_index(starts: np.ndarray, ends: np.ndarray,
                 max_frames: int) -> tuple[np.ndarray, np.ndarray]:
    """Frame rows ``(n, T)`` and their mask for videos spanning ``[starts, ends)`` of the frame
    table: every frame of a video with at most ``max_frames``, else ``max_frames`` evenly
    spaced ones, ``round(j * (len - 1) / (max_frames - 1))`` as ``np.linspace`` places them."""
    lengths = ends - starts
    width = max(1, min(int(lengths.max(initial=0)), max_frames))
    j = np.arange(width)[None, :]
    step = (lengths[:, None] - 1) / max(max_frames - 1, 1)
    spaced = np.round(j * step).astype(np.int64)
    long = lengths[:, None] > max_frames
    offset = np.where(long, spaced, j)
    mask = long | (j < lengths[:, None])
    return np.where(mask, starts[:, None] + offset, 0), mask


def _check_texts(folder: DatasetFolder, split: str, captions: dict, keep: list[int]) -> None:
    """Refuse empty or whitespace-only captions, as ``heuristics`` does (nothing to encode)."""
    for i in keep:
        text = captions["text"][i]
        if not isinstance(text, str) or not text.strip():
            raise LayoutError(
                f"{folder.root / 'captions' / (split + '.parquet')}: "
                f"caption {captions['caption_id'][i]!r} "
                f"({captions['lang'][i]}) is empty or whitespace only: {text!r}; fix or drop it"
            )


def load_videos(folder: DatasetFolder, split: str, experts: list[str],
                max_frames: int = 32) -> VideoData:
    """Read the videos of one split: features of ``experts`` and their availability."""
    try:
        videos = folder.videos(split).to_pydict()
    except LayoutError as error:
        hint = " (the model-selection split is data.val_split)" if split != "train" else ""
        raise LayoutError(f"{error}{hint}") from None
    video_ids = videos["video_id"]
    if not video_ids:
        raise LayoutError(f"{folder.root}: split {split!r} has no videos")
    row_of = {v: i for i, v in enumerate(video_ids)}
    features, frame_masks = {}, {}
    available = np.zeros((len(video_ids), len(experts)), dtype=bool)
    has = videos.get("experts") or [[] for _ in video_ids]
    for e, expert in enumerate(experts):
        listed = [v for v, names in zip(video_ids, has, strict=True) if expert in (names or ())]
        feats, masks, present = _load_expert(folder, expert, split, row_of, len(video_ids),
                                             max_frames, listed)
        features[expert] = feats
        if masks is not None:
            frame_masks[expert] = masks
        available[:, e] = present
    if not available.any(1).all():
        lost = video_ids[int(np.flatnonzero(~available.any(1))[0])]
        raise LayoutError(
            f"{folder.root}: video {lost!r} ({split}) has none of the experts {experts}")
    return VideoData(split, list(video_ids), list(experts), features, frame_masks,
                     torch.from_numpy(available))


def load_split(
    folder: DatasetFolder,
    split: str,
    experts: list[str],
    vocab: Vocabulary,
    langs,
    class_index: ClassIndex | None = None,
    max_words: int = 30,
    max_frames: int = 32,
    text_encoder=None,
) -> SplitData:
    """Read one split into tensors (captions restricted to ``langs``).

    With ``text_encoder`` (texts, video_ids, ordinals -> (features (N, L, D), mask (N, L)))
    the captions are encoded once into ``token_features`` (a ragged :class:`TokenStore`) and
    the masks are the encoder's; ``ordinals`` number each video's captions in table order
    (for CE's feature pickles). A :class:`DatasetTextFeatures` encoder reads the dataset's
    own ``text_features`` config instead.
    """
    folder.check_splits_agree()
    videos = load_videos(folder, split, experts, max_frames)
    row_of = {v: i for i, v in enumerate(videos.video_ids)}
    captions = folder.captions(split).to_pydict()
    keep = [i for i, lang in enumerate(captions["lang"]) if lang in langs]
    if not keep:
        raise LayoutError(
            f"{folder.root}: split {split!r} has no caption in languages {list(langs)}")
    _check_texts(folder, split, captions, keep)
    owner = np.array([row_of.get(captions["video_id"][i], -1) for i in keep])
    if (owner < 0).any():
        raise LayoutError(
            f"{folder.root}: caption {captions['caption_id'][keep[int(np.argmax(owner < 0))]]!r} "
            f"refers to a video that is not in the {split!r} videos"
        )
    slot = caption_ordinals(owner)
    num_slots = int(np.bincount(owner).max())
    shape = (videos.num_videos, num_slots)
    store = None
    if text_encoder is None:
        token_lists = [tokenize(captions["text"][i], captions["lang"][i]) for i in keep]
        tokens, mask = vocab.batch(token_lists, max_len=max_words)
        grid_tokens = torch.zeros(*shape, *tokens.shape[1:], dtype=torch.long)
        grid_mask = torch.zeros(*shape, tokens.shape[1], dtype=torch.bool)
        grid_tokens[owner, slot], grid_mask[owner, slot] = tokens, mask
    else:
        store = _token_store(folder, split, captions, keep, owner, slot, shape, max_words,
                             text_encoder)
        grid_tokens, grid_mask = torch.zeros(*shape, 1, dtype=torch.long), store.mask
    caption_mask = torch.zeros(shape, dtype=torch.bool)
    caption_mask[owner, slot] = True

    def grid(column):
        out = np.full(shape, None, dtype=object)
        out[owner, slot] = [captions[column][i] for i in keep]
        return out

    nouns = verbs = labelled = None
    if class_index is not None and "noun_classes" in captions:
        nouns = torch.zeros(*shape, len(class_index), dtype=torch.bool)
        verbs = torch.zeros(*shape, len(class_index), dtype=torch.bool)
        nouns[owner, slot] = class_index.multi_hot([captions["noun_classes"][i] for i in keep]) > 0
        verbs[owner, slot] = class_index.multi_hot([captions["verb_classes"][i] for i in keep]) > 0
        labelled = torch.zeros(shape, dtype=torch.bool)
        labelled[owner, slot] = torch.tensor([
            captions["noun_classes"][i] is not None and captions["verb_classes"][i] is not None
            for i in keep])
        _warn_unlabelled(folder, split, captions, keep, labelled[owner, slot])
    return SplitData(
        **vars(videos),
        tokens=grid_tokens,
        token_mask=grid_mask,
        caption_mask=caption_mask,
        caption_ids=grid("caption_id"),
        caption_langs=grid("lang"),
        caption_texts=grid("text"),
        nouns=nouns,
        verbs=verbs,
        token_features=store,
        labelled=labelled,
    )


def _warn_unlabelled(folder, split, captions, keep, labelled: torch.Tensor) -> None:
    """Say which languages have captions that were never labelled (null class columns)."""
    if bool(labelled.all()):
        return
    langs = sorted({captions["lang"][i] for i, ok in zip(keep, labelled.tolist(), strict=True)
                    if not ok})
    log.warning(
        "%s: %d of %d %s captions in %s have no noun/verb classes (never labelled); they "
        "count as sharing no class in relevance and pair labels and are left out of video "
        "class sets. Label them with `python -m heuristics label --dataset %s --langs %s`, "
        "or leave their languages out of data.caption_langs",
        folder.root, int((~labelled).sum()), len(keep), split, ", ".join(langs), folder.root,
        " ".join(langs))


def _check_pickle_alignment(folder, pickle) -> None:
    """Refuse a CE pickle read at training time where entry k is not the k-th English
    caption: MSR-VTT 1k-A's test sentences (JSFusion's, matched at build time), and any
    dataset whose build stored its own alignment (the ``text_features`` config)."""
    meta = folder.meta
    jsfusion = meta.extra.get("source") == "msrvtt" and meta.extra.get("split") == "1k-A"
    if meta.text_features_dim or jsfusion:
        raise LayoutError(
            f"{pickle.path} cannot be read at training time for {folder.root}: "
            + ("MSR-VTT 1k-A's test captions are not entry k of their video"
               if jsfusion else "its build matched the pickle's entries to the captions")
            + "; build with --text-features PICKLE and train with data.text_encoder=dataset")


def _token_store(folder, split, captions, keep, owner, slot, shape, max_words,
                 text_encoder) -> TokenStore:
    """Token features of the kept captions: the dataset's ``text_features`` config (cut to
    ``max_words``), or the encoder's output (its own length)."""
    if isinstance(text_encoder, DatasetTextFeatures):
        file = folder.text_features_file(split)
        check_feature_type(file.schema_arrow.field("feature").type,
                           ExpertInfo(text_encoder.dim, variable_length=True),
                           folder.root / "text_features" / f"{split}.parquet", "text_features_dim")
        wanted = [captions["caption_id"][i] for i in keep]
        try:
            return store_from_parquet(file, wanted, text_encoder.dim, owner, slot, shape, max_words)
        except KeyError as error:
            raise LayoutError(
                f"{folder.root}: caption {error.args[0]!r} ({split}) has no row in the "
                "text_features config (a CE pickle encodes the English captions only: keep "
                "data.caption_langs to the languages it covers)"
            ) from None
    if isinstance(text_encoder, CaptionFeatureFile):
        _check_pickle_alignment(folder, text_encoder)
        other = sorted({captions["lang"][i] for i in keep} - {text_encoder.lang})
        if other:
            raise LayoutError(
                f"{text_encoder.path} encodes the {text_encoder.lang!r} captions only, but "
                f"data.caption_langs also keeps {other} captions of {folder.root} ({split}); "
                f"set data.caption_langs: [{text_encoder.lang}]"
            )
    # the k-th caption of its video in its language: entry k of a CE pickle
    video_langs = [f"{v}\0{lang}"
                   for v, lang in zip(captions["video_id"], captions["lang"], strict=True)]
    return store_from_encoder(
        text_encoder,
        [captions["text"][i] for i in keep],
        [captions["video_id"][i] for i in keep],
        caption_ordinals(video_langs)[keep],
        owner, slot, shape, desc=f"encoding the {split} captions",
        langs=[captions["lang"][i] for i in keep],
    )
