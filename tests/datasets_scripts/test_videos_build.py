"""``python -m datasets_scripts build videos``: a folder of small videos -> a dataset folder;
bad rows and files, determinism, worker counts, shards, resume after kill -9, mixed weights."""

import json
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pyarrow.parquet as pq
import pytest

pytest.importorskip("av")

from datasets_scripts.__main__ import main
from datasets_scripts.video_decode import sample_times

from .video_files import write_video

ROOT = Path(__file__).resolve().parents[2]
FAST = ["--expert", "object=resnet18@random", "--expert", "audio=logmel", "--fps", "0.5"]
CAPTIONS = """video_id,start,end,lang,text,split
a,,,en,a square moves right,
a,0.5,1.5,en,the first second,
a,0.5,1.5,hi,पहला सेकंड,
b,,,en,a higher tone,
c,,,en,a silent video,
d,,,en,a rotated video,
vfr,,,en,frames at uneven times,
bad,,,en,a broken file,
empty,,,en,an empty file,
missing,,,en,no such file,
a,5,6,en,after the end,
c,x,2,en,bad time,
b,1,0.5,en,end before start,
b,,,xx,unknown language,
b,,,en,bad split,dev
"""


@pytest.fixture(scope="module")
def source(tmp_path_factory):
    root = tmp_path_factory.mktemp("videos")
    src = root / "src"
    src.mkdir()
    write_video(src / "a.mp4", frames=36)
    write_video(src / "b.webm", frames=30, tone=660.0)
    write_video(src / "c.mkv", audio=False)
    write_video(src / "d.mp4", rotation=90)
    write_video(src / "vfr.mp4", times=[0, 0.1, 0.5, 0.55, 1.2, 2.0])
    (src / "bad.mp4").write_bytes(b"garbage" * 100)
    (src / "empty.mp4").write_bytes(b"")
    (src / "notes.txt").write_text("no captions name this file")
    captions = root / "captions.csv"
    captions.write_text(CAPTIONS, encoding="utf-8")
    return src, captions


def build(src, captions, out, *flags):
    argv = ["build", "videos", "--src", str(src), "--captions", str(captions), "--out",
            str(out), *map(str, flags)]
    return main(argv)


def folder_bytes(out: Path) -> dict:
    return {str(p.relative_to(out)): p.read_bytes() for p in sorted(out.rglob("*"))
            if p.is_file() and not p.name.startswith(".")}


def test_build_writes_an_ordinary_dataset(source, tmp_path, capsys):
    src, captions = source
    out = tmp_path / "out"
    assert build(src, captions, out, *FAST, "--workers", "1") == 0
    err = capsys.readouterr().err
    assert "bad.mp4, file: unreadable video: 'not a readable video" in err
    assert "empty.mp4, file: unreadable video: 'zero-length file'" in err
    assert "line 12, field start: segment outside the video" in err
    assert "line 11, field video_id: no video file: 'missing'" in err
    assert "line 13, field start: time is not a finite number: 'x'" in err
    assert "line 14, field end: segment is empty or negative" in err
    assert "line 15, field lang: unsupported language: 'xx'" in err
    assert "line 16, field split: unknown split: 'dev'" in err
    assert "WARNING: expert object (resnet18) has RANDOM weights" in err
    assert "7/7 [" in err and "frames/s" in err  # the progress bar (files done, rate)
    assert not (tmp_path / "out.parts").exists()  # parts are removed after a full build

    meta = json.loads((out / "rudder.json").read_text())
    extra = meta["extra"]
    assert sorted(extra["media"]) == ["a", "a_0.50_1.50", "b", "c", "d", "vfr"]
    assert extra["media"]["a_0.50_1.50"] == {"file": "a.mp4", "start": 0.5, "end": 1.5}
    assert extra["media"]["b"]["file"] == "b.webm"
    assert sorted(d["line"] for d in extra["dropped_captions"]) == [9, 10, 12]
    assert extra["experts"]["object"]["weights"].startswith("random")
    assert extra["experts"]["audio"]["sampling_rate"] == 16000
    assert meta["experts"] == {"audio": {"dim": 128, "variable_length": True},
                               "object": {"dim": 512, "variable_length": True}}
    assert "RANDOM weights" in (out / "README.md").read_text()

    datasets = pytest.importorskip("datasets")
    loaded = datasets.load_dataset(str(out), "captions", cache_dir=str(tmp_path / "hf"))
    rows = [r for split in loaded.values() for r in split]
    assert len(rows) == 7
    segment = [r for r in rows if r["video_id"] == "a_0.50_1.50"]
    assert {r["lang"] for r in segment} == {"en", "hi"}
    assert all(r["start"] == 0.5 and r["end"] == 1.5 for r in segment)

    videos = {}
    for split in ("train", "validation", "test"):
        path = out / "videos" / f"{split}.parquet"
        for row in pq.read_table(path).to_pylist():
            videos[row["video_id"]] = row
    assert {v["split"] for v in videos.values()} == {"train", "validation", "test"}
    assert videos["a"]["split"] == videos["a_0.50_1.50"]["split"]  # split by file
    assert videos["c"]["experts"] == ["object"]  # no audio track: the audio expert is missing
    assert videos["a"]["experts"] == ["audio", "object"]
    features = {}
    for split in ("train", "validation", "test"):
        path = out / "features" / "object" / f"{split}.parquet"
        if path.is_file():
            for row in pq.read_table(path).to_pylist():
                features[row["video_id"]] = np.array(row["feature"])
    assert len(features["a"]) == len(sample_times(0, videos["a"]["duration"], 0.5))
    assert len(features["a_0.50_1.50"]) == 1


def test_same_bytes_whatever_the_workers_and_shards(source, tmp_path, capsys):
    src, captions = source
    out = tmp_path / "out"
    assert build(src, captions, out, *FAST, "--workers", "0") == 0
    reference = folder_bytes(out)
    shutil.rmtree(out)
    assert build(src, captions, out, *FAST, "--workers", "2") == 0
    assert folder_bytes(out) == reference
    shutil.rmtree(out)
    capsys.readouterr()
    assert build(src, captions, out, *FAST, "--shard", "1/2", "--workers", "0") == 0
    assert "not done yet" in capsys.readouterr().err and not out.exists()
    assert build(src, captions, out, *FAST, "--shard", "0/2", "--workers", "0") == 0
    assert folder_bytes(out) == reference
    assert (tmp_path / "out.parts").is_dir()  # kept: another shard may still read it
    # a late shard finds the dataset written
    assert build(src, captions, out, *FAST, "--shard", "1/2", "--workers", "0") == 0
    assert "already written by another shard" in capsys.readouterr().err
    # changed captions: the last shard rewrites the folder instead
    more = tmp_path / "more.csv"
    more.write_text(captions.read_text() + "c,,,en,one more caption\n")
    assert build(src, more, out, *FAST, "--shard", "1/2", "--workers", "0", "--overwrite") == 0
    assert "already written" not in capsys.readouterr().err
    assert folder_bytes(out) != reference


def test_torchrun_environment_picks_the_shard(source, tmp_path, monkeypatch, capsys):
    src, captions = source
    monkeypatch.setenv("RANK", "1")
    monkeypatch.setenv("WORLD_SIZE", "3")
    assert build(src, captions, tmp_path / "out", *FAST, "--workers", "0") == 0
    assert "shard 1/3 done" in capsys.readouterr().err
    parts = sorted(p.stem for p in (tmp_path / "out.parts").glob("*.npz"))
    assert parts == ["b", "d"]  # files sorted: a b bad c d empty vfr; every 3rd from 1


def test_parts_of_other_weights_are_refused(source, tmp_path, capsys):
    import torch

    from datasets_scripts.video_nets import resnet18

    src, captions = source
    out = tmp_path / "out"
    assert build(src, captions, out, *FAST, "--shard", "0/2", "--workers", "0") == 0
    weights = tmp_path / "r18.pth"
    torch.save(resnet18().state_dict(), weights)
    other = ["--expert", f"object=resnet18@{weights}", "--expert", "audio=logmel", "--fps", "0.5"]
    capsys.readouterr()
    assert build(src, captions, out, *other, "--shard", "1/2", "--workers", "0") == 2
    err = capsys.readouterr().err
    assert err.startswith("error: ") and err.count("\n") == 1
    assert "other experts, weights or --fps" in err and "expert object" in err
    assert "--overwrite" in err
    assert build(src, captions, out, *FAST[:4], "--fps", "1", "--shard", "1/2") == 2
    assert "fps 0.5 here, 1.0 now" in capsys.readouterr().err


def test_existing_output_needs_overwrite(source, tmp_path, capsys):
    src, captions = source
    out = tmp_path / "out"
    out.mkdir()
    assert build(src, captions, out, *FAST) == 2
    assert "not a rudder dataset folder" in capsys.readouterr().err
    out.rmdir()
    assert build(src, captions, out, "--expert", "audio=logmel", "--workers", "0") == 0
    assert build(src, captions, out, "--expert", "audio=logmel") == 2
    assert "already exists; pass --overwrite" in capsys.readouterr().err
    # a shard may not replace a folder of other settings either
    assert build(src, captions, out, *FAST, "--shard", "0/2") == 2
    assert "already exists; pass --overwrite" in capsys.readouterr().err
    assert build(src, captions, out, "--expert", "audio=logmel", "--overwrite") == 0


@pytest.mark.parametrize(
    "flags, message",
    [
        (["--shard", "2/2"], "--shard '2/2': use K/N with 0 <= K < N"),
        (["--expert", "object=resnet99"], "unknown architecture 'resnet99'"),
        (["--expert", "a=logmel", "--expert", "a=logmel"], "a name is used twice"),
        (["--fps", "0"], "argument --fps: expected a number in (0, 240]"),
        (["--workers", "-1"], "argument --workers: -1 is outside [0, 64]"),
        (["--validation-fraction", "0.6", "--test-fraction", "0.5"], "must be below 1"),
        (["--device", "cuda"], "no CUDA device"),
    ],
)
def test_bad_flags_are_one_error_line(source, tmp_path, capsys, flags, message):
    import torch

    if "cuda" in flags and torch.cuda.is_available():
        pytest.skip("a CUDA device is here")
    src, captions = source
    try:  # a value the parser refuses exits from argparse; the others return 2
        code = build(src, captions, tmp_path / "out", "--expert", "audio=logmel", *flags)
    except SystemExit as stop:
        code = stop.code
    assert code == 2
    err = capsys.readouterr().err
    assert err.startswith("error: ") and message in err and err.count("\n") == 1


def test_without_pyav_the_extra_is_named(source, tmp_path, monkeypatch, capsys):
    monkeypatch.setitem(sys.modules, "av", None)
    src, captions = source
    assert build(src, captions, tmp_path / "out", "--expert", "audio=logmel") == 2
    err = capsys.readouterr().err
    assert err.startswith("error: av (for decoding video files")
    assert 'pip install -e ".[videos]"' in err


def test_captions_file_errors(source, tmp_path, capsys):
    src, _ = source
    header = tmp_path / "c.csv"
    header.write_text("video,start,end,lang,text\na,,,en,x\n")
    assert build(src, header, tmp_path / "o", "--expert", "audio=logmel") == 2
    assert "line 1: the header lacks column(s) ['video_id']" in capsys.readouterr().err
    jsonl = tmp_path / "c.jsonl"
    jsonl.write_text('{"video_id": "c", "start": null, "end": null, "lang": "en", "text": "ok"}\n'
                     "{not json\n"
                     '{"video_id": "c", "start": 1, "end": null, "lang": "en", "text": "x"}\n'
                     '{"video_id": "c", "start": null, "end": null, "lang": "en", "text": ""}\n'
                     '["a list"]\n')
    code = build(src, jsonl, tmp_path / "o", "--expert", "audio=logmel", "--expert",
                 "object=resnet18@random", "--fps", "0.5", "--workers", "0")
    err = capsys.readouterr().err
    assert code == 0
    assert "c.jsonl, line 2: not a JSON object" in err
    assert "c.jsonl, line 3, field end: only one of start/end" in err
    assert "c.jsonl, line 4, field text: empty field text" in err
    assert "c.jsonl, line 5: not a JSON object" in err
    assert "expert audio: no video has it" in err  # c.mkv has no audio track
    assert build(src, jsonl, tmp_path / "o2", "--expert", "audio=logmel", "--strict") == 2
    assert "--strict stops at the first problem" in capsys.readouterr().err


@pytest.mark.slow
def test_resume_after_kill_9(source, tmp_path, capsys):
    src, _ = source
    many = tmp_path / "many"
    many.mkdir()
    rows = ["video_id,start,end,lang,text"]
    for k in range(8):
        shutil.copy(src / "a.mp4", many / f"v{k}.mp4")
        rows.append(f"v{k},,,en,video {k}")
    captions = tmp_path / "many.csv"
    captions.write_text("\n".join(rows) + "\n")
    flags = ["--expert", "object=resnet18@random", "--fps", "4", "--workers", "1"]
    out = tmp_path / "out"
    assert build(many, captions, out, *flags) == 0
    reference = folder_bytes(out)
    shutil.rmtree(out)

    command = [sys.executable, "-m", "datasets_scripts", "build", "videos", "--src", str(many),
               "--captions", str(captions), "--out", str(out), *flags]
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    proc = subprocess.Popen(command, cwd=ROOT, env=env, stderr=subprocess.DEVNULL)
    parts = tmp_path / "out.parts"
    deadline = time.monotonic() + 120
    while len(list(parts.glob("*.npz"))) < 2 and time.monotonic() < deadline:
        if proc.poll() is not None:
            pytest.fail("the build ended before it could be killed")
        time.sleep(0.02)
    children = _children(proc.pid)
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    deadline = time.monotonic() + 30  # its decoding worker notices and exits too
    while any(_alive(pid) for pid in children) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert children and not any(_alive(pid) for pid in children)
    done = sorted(parts.glob("*.npz"))
    assert 2 <= len(done) < 8 and not out.exists()
    from datasets_scripts.videos import read_part

    assert all(read_part(p) is not None for p in done)  # never a half-written part
    capsys.readouterr()
    assert build(many, captions, out, *flags) == 0
    assert f"resuming: {len(done)} of 8 file(s) already done" in capsys.readouterr().err
    assert folder_bytes(out) == reference
    assert not [p for p in tmp_path.iterdir() if p.name.startswith(".out")]


def _children(pid: int) -> list[int]:
    """Process ids whose parent is ``pid`` (from /proc)."""
    found = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                fields = (entry / "stat").read_text().rsplit(")", 1)[1].split()
            except OSError:
                continue
            if int(fields[1]) == pid:
                found.append(int(entry.name))
    return found


def _alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return False
    return state != "Z"


@pytest.mark.slow
def test_build_then_train(source, tmp_path):
    src, captions = source
    out = tmp_path / "out"
    flags = ["--expert", "object=resnet18@random", "--expert", "motion=r2plus1d_18@random",
             "--expert", "audio=logmel", "--fps", "1"]
    assert build(src, captions, out, *flags) == 0
    meta = json.loads((out / "rudder.json").read_text())
    assert meta["extra"]["experts"]["motion"]["clip_frames"] == 16
    result = subprocess.run(
        [sys.executable, "-m", "rudder.train", "--dataset", str(out), "--epochs", "1",
         "--output-dir", str(tmp_path / "run")],
        cwd=ROOT, env={**os.environ, "OMP_NUM_THREADS": "1"}, capture_output=True, text=True,
        check=False,
    )
    assert result.returncode == 0, result.stderr[-2000:]
    assert "text→video (en)" in result.stdout + result.stderr


def test_a_work_folder_keeps_what_the_build_did_not_write(source, tmp_path, capsys):
    """--work names the parts folder: one holding someone else's files is refused, and the
    clean-up after a one-process build removes only the build's own files."""
    src, captions = source
    precious = tmp_path / "precious"
    precious.mkdir()
    (precious / "notes.txt").write_text("mine")
    code = build(src, captions, tmp_path / "out", *FAST, "--workers", "0", "--work", str(precious))
    err = capsys.readouterr().err
    assert code == 2 and "not a video build's parts" in err and err.count("\n") == 1
    assert (precious / "notes.txt").read_text() == "mine" and not (tmp_path / "out").exists()

    work = tmp_path / "work"
    assert build(src, captions, tmp_path / "out", *FAST, "--workers", "0", "--work",
                 str(work)) == 0
    assert not work.exists()  # the build's own parts folder is gone after the build


def test_the_card_records_no_local_path_and_publishing_random_experts_warns(
        source, tmp_path, capsys):
    """The card and rudder.json go to the Hub: the build command they record names the
    folders and files, not where they were on the building machine; publishing a folder of
    random-weight features says so on the command line (and names the local paths of a
    folder built before)."""
    from datasets_scripts.publish import publish

    src, captions = source
    out = tmp_path / "out"
    assert build(src, captions, out, *FAST, "--workers", "0") == 0
    capsys.readouterr()
    meta = json.loads((out / "rudder.json").read_text())
    recorded = meta["extra"]["command"]
    assert recorded == ("python -m datasets_scripts build videos --src src --captions "
                        "captions.csv --out out --expert object=resnet18@random --expert "
                        "audio=logmel --fps 0.5")
    card = (out / "README.md").read_text()
    assert str(tmp_path) not in card and str(src.parent) not in card
    assert str(src.parent) not in json.dumps(meta["extra"]["card"])  # the card's copy
    assert str(src.parent) not in json.dumps(meta["extra"]["experts"])
    publish(out, "me/own", dry_run=True)
    err = capsys.readouterr().err.splitlines()
    assert err == [("WARNING: expert object (object=resnet18@random) has RANDOM weights: its "
                    "features only check the pipeline and say nothing about the videos; "
                    "rebuild with trained weights (@hub or @/path/to/weights) before sharing")]
    meta["extra"]["command"] = recorded.replace("--src src", f"--src {src}")  # an older build
    (out / "rudder.json").write_text(json.dumps(meta))
    publish(out, "me/own", dry_run=True)
    assert capsys.readouterr().err.splitlines()[1] == (
        f"WARNING: the build command in README.md and rudder.json names local paths ({src}) "
        "that the upload would publish; edit them out of both files first (a new build "
        "records names only)")
