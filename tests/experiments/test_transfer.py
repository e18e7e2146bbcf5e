"""experiments.transfer: the few-shot subsets and the table."""

import pyarrow as pa
import pyarrow.parquet as pq

from experiments.transfer import LANGS, _keep_fraction, table


def test_a_fraction_of_the_videos_keeps_its_tamil_and_telugu_captions(tmp_path):
    videos = [f"v{i}" for i in range(10)]
    rows = {"video_id": videos * 3, "lang": ["mr"] * 10 + ["ta"] * 10 + ["te"] * 10}
    path = tmp_path / "train.parquet"
    pq.write_table(pa.table(rows), path)
    _keep_fraction(path, 0.3, seed=0)
    kept = pq.read_table(path).to_pydict()
    assert kept["lang"].count("mr") == 10  # Marathi untouched
    ta = {v for v, g in zip(kept["video_id"], kept["lang"], strict=True) if g == "ta"}
    te = {v for v, g in zip(kept["video_id"], kept["lang"], strict=True) if g == "te"}
    assert len(ta) == 3 and ta == te  # the same 3 videos keep both languages
    pq.write_table(pa.table(rows), path)
    _keep_fraction(path, 0.3, seed=0)
    assert pq.read_table(path).to_pydict() == kept  # seeded


def test_the_table_gives_each_language_and_the_ratios():
    per = {lang: {"R10": 50.0} for lang in LANGS} | {"mr": {"R10": 80.0}, "ta": {"R10": 40.0}}
    text = table({"run": {"validation": per, "test": per}})
    assert "| run | test | 80.0 | 50.0 | 40.0 | 50.0 | 50.0 | 0.50 | 0.62 |" in text
