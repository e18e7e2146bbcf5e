"""rudder.data.loader reads features from Arrow buffers: same values as a plain Python read."""

import numpy as np
import pyarrow as pa
import pytest
import torch

from rudder.data.layout import DatasetFolder
from rudder.data.loader import _frame_index, load_videos


@pytest.mark.parametrize("max_frames", [1, 3, 4, 7])
def test_frame_index_is_linspace_subsampling(max_frames):
    lengths = np.array([0, 1, 3, 4, 5, 9, 20])
    starts = np.concatenate([[0], np.cumsum(lengths)[:-1]])
    index, mask = _frame_index(starts, starts + lengths, max_frames)
    for row, (start, length) in enumerate(zip(starts, lengths, strict=True)):
        expected = (np.arange(length) if length <= max_frames
                    else np.linspace(0, length - 1, max_frames).round().astype(int))
        assert mask[row].sum() == len(expected)
        assert index[row][mask[row]].tolist() == (start + expected).tolist()


def test_features_equal_a_python_read(tiny_dataset):
    folder = DatasetFolder(tiny_dataset)
    videos = load_videos(folder, "train", ["audio@mr", "object"], max_frames=2)
    row_of = {v: i for i, v in enumerate(videos.video_ids)}
    fixed = folder.features("object", "train").to_pydict()
    for vid, feature in zip(fixed["video_id"], fixed["feature"], strict=True):
        if vid in row_of:
            assert torch.equal(videos.features["object"][row_of[vid]],
                               torch.tensor(feature, dtype=torch.float32))
    audio = folder.features("audio@mr", "train").to_pydict()
    seen = 0
    for vid, frames in zip(audio["video_id"], audio["feature"], strict=True):
        if vid in row_of:
            frames = np.asarray(frames, np.float32)[
                np.linspace(0, len(frames) - 1, 2).round().astype(int)]
            row = row_of[vid]
            assert videos.frame_masks["audio@mr"][row].tolist() == [True, True]
            assert torch.equal(videos.features["audio@mr"][row], torch.from_numpy(frames))
            seen += 1
    assert seen and videos.available.sum(0).tolist()[0] == seen


def test_a_nan_feature_is_reported_with_its_video(tiny_dataset, tmp_path):
    import shutil

    import pyarrow.parquet as pq

    from rudder.data.layout import LayoutError

    copy = tmp_path / "copy"
    shutil.copytree(tiny_dataset, copy)
    path = copy / "features" / "object" / "train.parquet"
    table = pq.read_table(path)
    values = np.array(table.column("feature").to_pylist(), np.float32)
    values[3, 5] = np.nan  # written behind the writer's back (the writer refuses NaN)
    column = pa.FixedSizeListArray.from_arrays(pa.array(values.reshape(-1)), values.shape[1])
    pq.write_table(table.set_column(1, "feature", column), path)
    bad = table.column("video_id")[3].as_py()
    with pytest.raises(LayoutError, match=rf"object/train.parquet: video '{bad}' has NaN .*fix "):
        load_videos(DatasetFolder(copy), "train", ["object"])


def _rewrite(tiny_dataset, tmp_path, expert, change):
    """A copy of the dataset whose ``expert`` train file is ``change(table)``."""
    import shutil

    import pyarrow.parquet as pq

    copy = tmp_path / "copy"
    shutil.copytree(tiny_dataset, copy)
    path = copy / "features" / expert / "train.parquet"
    pq.write_table(change(pq.read_table(path)), path)
    return DatasetFolder(copy)


def test_a_feature_size_other_than_rudder_json_is_refused(tiny_dataset, tmp_path):
    """Twice the declared size reshapes without error into other videos' values."""
    from rudder.data.layout import LayoutError

    def doubled(table):
        values = np.array(table.column("feature").to_pylist(), np.float32)
        wide = np.concatenate([values, values], axis=1)
        column = pa.FixedSizeListArray.from_arrays(pa.array(wide.reshape(-1)), wide.shape[1])
        return table.set_column(1, "feature", column)

    folder = _rewrite(tiny_dataset, tmp_path, "object", doubled)
    dim = folder.meta.experts["object"].dim
    with pytest.raises(LayoutError, match=rf"object/train.parquet: feature is .*\[{2 * dim}\], "
                       rf"but rudder.json declares experts.object.dim = {dim}"):
        load_videos(folder, "train", ["object"])


def test_a_features_file_of_another_split_is_refused(tiny_dataset, tmp_path):
    def renamed(table):
        return table.set_column(0, "video_id", pa.array([f"x{i}" for i in range(len(table))]))

    from rudder.data.layout import LayoutError

    folder = _rewrite(tiny_dataset, tmp_path, "object", renamed)
    with pytest.raises(LayoutError, match=r"object/train.parquet: none of its \d+ video ids is a "
                       r"'train' video"):
        load_videos(folder, "train", ["object"])


def test_a_declared_expert_missing_on_a_split_is_an_error(tiny_dataset, tmp_path):
    """A deleted features/<expert>/<split>.parquet whose videos list the expert is refused,
    not read as 'no video has it' (R@10 dropped silently); a split none of whose
    videos list the expert still reads without the file."""
    import shutil

    import pyarrow.parquet as pq

    from rudder.data.layout import LayoutError

    root = tmp_path / "copy"
    shutil.copytree(tiny_dataset, root)
    (root / "features" / "object" / "test.parquet").unlink()
    with pytest.raises(LayoutError, match=r"object/test.parquet is missing, but \d+ 'test' "
                                          r"video\(s\) list expert 'object'.*data.experts"):
        load_videos(DatasetFolder(root), "test", ["audio@mr", "object"])
    shutil.copy(tiny_dataset / "features" / "object" / "test.parquet",
                root / "features" / "object" / "test.parquet")
    (root / "features" / "audio@mr" / "test.parquet").unlink()
    videos = DatasetFolder(root).videos("test")
    kept = pa.table({**videos.to_pydict(), "experts": [
        [e for e in names if e != "audio@mr"] for names in videos.column("experts").to_pylist()]},
        schema=videos.schema)
    pq.write_table(kept, root / "videos" / "test.parquet")
    loaded = load_videos(DatasetFolder(root), "test", ["audio@mr", "object"])
    assert not loaded.available[:, 0].any() and loaded.available[:, 1].all()
