"""The on-disk cache of video indexes (:class:`rudder.search.index.VideoIndex`).

The per-expert video embeddings of a collection are computed once with the model and
cached under a key made of the model's fingerprint (the checkpoint's, or a hash of the
weights) and the dataset's fingerprint, so a new checkpoint or changed data never reuses
stale embeddings.
"""

from __future__ import annotations

import hashlib
import logging
from pathlib import Path

import torch

from rudder.data.layout import SPLITS, DatasetFolder, LayoutError
from rudder.paths import cache_dir
from rudder.search.index import INDEX_VERSION, SearchIndexError, VideoIndex

log = logging.getLogger(__name__)


def model_fingerprint(model: torch.nn.Module) -> str:
    """SHA-256 (16 hex digits) of the model's parameter and buffer values, in name order."""
    digest = hashlib.sha256()
    for name, tensor in sorted(model.state_dict().items()):
        digest.update(name.encode())
        digest.update(tensor.detach().cpu().contiguous().numpy().tobytes())
    return digest.hexdigest()[:16]


def index_key(model_key: str, dataset: DatasetFolder, splits, max_frames: int) -> str:
    """Cache key: index format, model, dataset fingerprint and content digests (features
    rewritten at the same sizes), splits and frame cap."""
    data = f"{dataset.fingerprint()}|{dataset.content_digests()}"
    text = f"v{INDEX_VERSION}|{model_key}|{data}|{','.join(splits)}|{max_frames}"
    return hashlib.sha256(text.encode()).hexdigest()[:24]


def default_cache_dir() -> Path:
    """``$RUDDER_CACHE/index`` (default ``~/.cache/rudder/index``)."""
    return cache_dir("index")


def present_splits(dataset: DatasetFolder) -> list[str]:
    """The splits of ``dataset`` that have videos."""
    return [s for s in SPLITS if (dataset.root / "videos" / f"{s}.parquet").is_file()]


@torch.no_grad()
def build_index(
    model,
    dataset: DatasetFolder,
    splits=None,
    max_frames: int = 32,
    key: str = "",
) -> VideoIndex:
    """Embed every video of ``splits`` (default: all present) with ``model`` (eval mode)."""
    from rudder.data.loader import load_videos
    from rudder.evaluation.inference import embed_videos

    splits = list(splits or present_splits(dataset))
    if not splits:
        raise LayoutError(f"{dataset.root}: no split has videos")
    for expert in model.experts:
        have, want = dataset.meta.experts.get(expert), model.expert_info[expert]
        if have is None or (have.dim, have.variable_length) != (want.dim, want.variable_length):
            raise LayoutError(
                f"{dataset.root}: expert {expert!r} is {have} but the model was trained "
                f"with {want}; "
                f"search a dataset with the model's experts {model.experts}"
            )
    was_training = model.training
    model.eval()
    video_ids, embeddings, available = [], [], []
    device = next(model.parameters()).device
    for split in splits:
        data = load_videos(dataset, split, model.experts, max_frames=max_frames)
        video_ids += data.video_ids
        embeddings.append(embed_videos(model, data, device, max_frames).float().cpu())
        available.append(data.available)
    model.train(was_training)
    return VideoIndex(video_ids, model.experts, torch.cat(embeddings), torch.cat(available), key)


def load_or_build(
    model,
    dataset: DatasetFolder,
    model_key: str | None = None,
    cache_dir=None,
    splits=None,
    max_frames: int = 32,
) -> VideoIndex:
    """The cached index of ``dataset`` for ``model``, built and saved on a cache miss.

    ``model_key`` identifies the weights (a checkpoint fingerprint); by default a hash of
    the weights themselves (:func:`model_fingerprint`). An entry that cannot be read is
    rebuilt, with a warning.
    """
    splits = list(splits or present_splits(dataset))
    key = index_key(model_key or model_fingerprint(model), dataset, splits, max_frames)
    path = Path(cache_dir or default_cache_dir()) / f"{key}.pt"
    if path.is_file():
        try:
            index = VideoIndex.load(path)
        except SearchIndexError as error:
            log.warning("unusable index cache entry, rebuilding it: %s", error)
        else:
            if index.key == key:
                return index
    index = build_index(model, dataset, splits, max_frames, key)
    index.save(path)
    return index
