"""A dataset's captions and videos in memory, for display and annotation (no model needed)."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np
import pandas as pd

from rudder.data.layout import DatasetFolder, LayoutError
from rudder.search.index_cache import present_splits

if TYPE_CHECKING:
    from .playback import Playback

VIDEO_EXTENSIONS = (".mp4", ".webm", ".ogv", ".ogg", ".mov", ".m4v", ".mkv", ".avi", ".ts",
                    ".m2ts", ".mts", ".mpg", ".mpeg", ".flv", ".3gp", ".wmv")


class Collection:
    """Every split of a dataset folder: ``captions`` and ``videos`` as pandas tables.

    ``captions`` has the layout's caption columns (plus the noun/verb columns
    when present) and a ``split`` column; rows keep the dataset's order, so "next" and
    "first" are deterministic. ``media_dir`` holds the video files, if any: the file
    ``rudder.json`` names for a video in ``extra.media`` (``{video_id: {"file": name,
    ...}}``, written by ``python -m datasets_scripts build videos``, whose segment videos
    share their source file; caption times are times in that file), else
    ``<video_id><ext>``. ``playback`` (an :class:`app.playback.Playback`, set by the app)
    gives the players a browser-playable source for each file.
    """

    def __init__(self, folder: DatasetFolder, media_dir=None):
        self.folder = folder
        self.name = folder.meta.name
        self.media_dir = Path(media_dir).resolve() if media_dir else None
        self.playback: Playback | None = None
        media = folder.meta.extra.get("media") if isinstance(folder.meta.extra, dict) else None
        self.media_files = {
            str(video_id): str(entry["file"])
            for video_id, entry in (media if isinstance(media, dict) else {}).items()
            if isinstance(entry, dict) and entry.get("file")
        }
        splits = present_splits(folder)
        if not splits:
            raise LayoutError(
                f"{folder.root}: no split has videos (videos/<split>.parquet); build the "
                "dataset with python -m datasets_scripts build"
            )
        captions, videos = [], []
        for split in splits:
            videos.append(folder.videos(split).to_pandas())
            table = folder.captions(split).to_pandas()
            table["split"] = split
            captions.append(table)
        self.videos = pd.concat(videos, ignore_index=True).set_index("video_id", drop=False)
        self.captions = pd.concat(captions, ignore_index=True)
        self.captions["start"] = self.captions["start"].astype(float)
        self.captions["end"] = self.captions["end"].astype(float)
        self.row_of = pd.Series(np.arange(len(self.captions)), index=self.captions["caption_id"])
        self._columns = {c: self.captions[c].to_numpy() for c in self.captions.columns}
        self.languages = sorted(self.captions["lang"].unique())
        self._by_video = self.captions.groupby("video_id", sort=False).indices

    def __repr__(self) -> str:
        return (
            f"Collection({self.name!r}, {len(self.videos)} videos, {len(self.captions)} captions)"
        )

    def record(self, position: int) -> dict:
        """The caption at ``position`` in ``captions`` as a dict of its columns."""
        return {column: values[position] for column, values in self._columns.items()}

    def caption(self, caption_id: str) -> dict:
        """The caption ``caption_id`` as a dict; ``KeyError`` with a clear message when absent."""
        position = self.row_of.get(caption_id)
        if position is None:
            raise KeyError(f"dataset {self.name!r} has no caption {caption_id!r}")
        return self.record(int(position))

    def caption_rows(self, video_id: str) -> np.ndarray:
        """Positions (in ``captions``) of the captions of ``video_id``."""
        return self._by_video.get(video_id, np.zeros(0, dtype=np.int64))

    def experts_of(self, video_id: str) -> list[str]:
        return list(self.videos.at[video_id, "experts"])

    def media_path(self, video_id: str) -> Path | None:
        """The video file of ``video_id`` inside the media folder (never outside it)."""
        if self.media_dir is None:
            return None
        names = [self.media_files[video_id]] if video_id in self.media_files else []
        for name in names + [f"{video_id}{ext}" for ext in VIDEO_EXTENSIONS]:
            path = (self.media_dir / name).resolve()
            if path.is_file() and path.is_relative_to(self.media_dir):
                return path
        return None
