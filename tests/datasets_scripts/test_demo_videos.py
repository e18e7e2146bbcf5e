"""``python -m datasets_scripts demo-videos OUT``: the clips and captions of the own-videos
example, and the example itself from them (build videos with random-weight experts)."""

import json

import pytest

pytest.importorskip("av")

from datasets_scripts.__main__ import main
from datasets_scripts.build_report import Reporter
from datasets_scripts.captions_table import read_captions
from datasets_scripts.demo_videos import CLIPS
from datasets_scripts.video_decode import probe


@pytest.fixture(scope="module")
def demo(tmp_path_factory):
    out = tmp_path_factory.mktemp("demo") / "demo"
    assert main(["demo-videos", str(out)]) == 0
    return out


def test_the_demo_writes_every_clip_and_its_captions(demo, capsys):
    names = sorted(p.name for p in (demo / "videos").iterdir())
    assert names == sorted(f"{c.stem}{c.suffix}" for c in CLIPS)
    for clip in CLIPS:
        info = probe(demo / "videos" / f"{clip.stem}{clip.suffix}")
        assert info.duration == pytest.approx(clip.seconds, abs=0.15), clip.stem
        assert info.has_audio == (clip.audio_codec is not None) and info.width == 160
    reporter = Reporter()
    rows = read_captions(demo / "captions.csv", reporter)
    assert reporter.skipped == 0 and len(rows) == 3 * len(CLIPS)
    assert {r.lang for r in rows} == {"en", "hi"}
    assert main(["demo-videos", str(demo)]) == 2  # not over an existing folder
    assert "is not empty; pass --overwrite" in capsys.readouterr().err


def test_overwrite_replaces_the_folder_whole(tmp_path):
    from datasets_scripts.demo_videos import write_demo

    out = tmp_path / "demo"
    out.mkdir()
    (out / "old.txt").write_text("from before")
    write_demo(out, overwrite=True, clips=CLIPS[:1])
    assert sorted(p.name for p in out.rglob("*")) == ["captions.csv", "kite.mp4", "videos"]


@pytest.mark.slow
def test_the_own_videos_example_runs_from_the_demo(demo, tmp_path, capsys):
    out = tmp_path / "own"
    code = main(["build", "videos", "--src", str(demo / "videos"), "--captions",
                 str(demo / "captions.csv"), "--out", str(out), "--expert",
                 "object=resnet18@random", "--expert", "audio=logmel", "--fps", "1"])
    err = capsys.readouterr().err
    assert code == 0, err
    assert "WARNING: expert object (resnet18) has RANDOM weights" in err
    assert "no bad records" in err
    meta = json.loads((out / "rudder.json").read_text())
    assert meta["languages"] == ["hi", "en"]
    assert len(meta["extra"]["media"]) == 2 * len(CLIPS)  # whole clips and segments
    assert meta["extra"]["experts"]["object"]["weights"].startswith("random")
    assert "RANDOM weights" in (out / "README.md").read_text()
    assert meta["extra"]["media"]["top"]["end"] == pytest.approx(5.0, abs=0.1)  # starts at 1.5 s
    videos = {v: e for v, e in meta["extra"]["media"].items()}
    assert videos["drum_0.50_2.00"] == {"file": "drum.mkv", "start": 0.5, "end": 2.0}
