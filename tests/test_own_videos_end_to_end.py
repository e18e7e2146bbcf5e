"""Your own videos, the whole way: a folder of small video files and a captions
CSV -> ``python -m datasets_scripts build videos`` -> ``datasets.load_dataset`` ->
``rudder.train`` -> ``python -m app --dataset OUT --media DIR`` served, searched over HTTP:
each hit has a thumbnail of its segment's middle frame and plays its segment of its file (of
a browser-playable copy for the Matroska files)."""

import csv
import io
import json
import math
import time
import urllib.parse
import urllib.request

import numpy as np
import pytest

pytest.importorskip("av")
pytest.importorskip("gradio_client")

from .app.conftest import free_port
from .datasets_scripts.video_files import read_index, write_video

FPS = 12
# stem, suffix, frames (at 12 fps: 2-3 s), and the segments captioned (start, end seconds)
FILES = [
    ("beach", ".mp4", 36, [(0.5, 1.5)]),
    ("city", ".mp4", 30, [(1.0, 2.0)]),
    ("dance", ".mkv", 24, []),
    ("field", ".mp4", 36, [(0.25, 1.75)]),
    ("garden", ".webm", 30, []),
    ("harbor", ".mp4", 24, [(0.5, 1.0)]),
    ("island", ".mp4", 36, []),
    ("jungle", ".mkv", 30, [(1.5, 2.5)]),
    ("kitchen", ".mp4", 24, []),
    ("lake", ".mp4", 36, [(0.0, 1.0)]),
    ("market", ".webm", 24, []),
    ("night", ".mp4", 30, []),
    ("ocean", ".mp4", 36, []),
]
THUMB_WIDTH = 160  # app.thumbnails.WIDTH


def _captions() -> list[dict]:
    rows = []
    for stem, _, _, segments in FILES:
        rows.append({"video_id": stem, "start": "", "end": "", "lang": "en",
                     "text": f"a white square moves across the {stem}"})
        rows.append({"video_id": stem, "start": "", "end": "", "lang": "hi",
                     "text": f"{stem} में एक सफ़ेद वर्ग चलता है"})
        for start, end in segments:
            rows.append({"video_id": stem, "start": start, "end": end, "lang": "en",
                         "text": f"the square moves for one second in the {stem}"})
            rows.append({"video_id": stem, "start": start, "end": end, "lang": "hi",
                         "text": f"{stem} में वर्ग एक सेकंड चलता है"})
    return rows


def _first_frame_at(seconds: float) -> int:
    """The index of the first frame shown at or after ``seconds`` (frames at i / FPS)."""
    return math.ceil(seconds * FPS - 1e-6)


@pytest.mark.slow
def test_own_videos_build_train_and_search_with_thumbnails_and_segments(tmp_path, monkeypatch):
    import datasets
    from PIL import Image

    import app.__main__ as app_cli
    import app.ui
    from datasets_scripts.__main__ import main as scripts_main
    from rudder import train

    # 1. a folder of videos (three containers, tones of different pitch) and CAPTIONS.csv
    src = tmp_path / "my videos"
    src.mkdir()
    for k, (stem, suffix, frames, _) in enumerate(FILES):
        write_video(src / f"{stem}{suffix}", frames=frames, fps=FPS, tone=330.0 + 60 * k)
    rows = _captions()
    captions = tmp_path / "CAPTIONS.csv"
    with captions.open("w", newline="", encoding="utf-8") as handle:
        writer = csv.DictWriter(handle, ["video_id", "start", "end", "lang", "text"])
        writer.writeheader()
        writer.writerows(rows)

    # 2. the build
    out = tmp_path / "OUT"
    assert scripts_main(["build", "videos", "--src", str(src), "--captions", str(captions),
                         "--out", str(out), "--expert", "object=resnet18@random",
                         "--expert", "audio=logmel", "--workers", "0"]) == 0
    meta = json.loads((out / "rudder.json").read_text(encoding="utf-8"))
    media = meta["extra"]["media"]
    segment_ids = {f"{stem}_{start:.2f}_{end:.2f}": (stem + suffix, start, end)
                   for stem, suffix, _, segments in FILES for start, end in segments}
    assert set(media) == {stem for stem, *_ in FILES} | set(segment_ids)
    for video_id, (name, start, end) in segment_ids.items():
        assert media[video_id] == {"file": name, "start": start, "end": end}
    assert meta["experts"] == {"audio": {"dim": 128, "variable_length": True},
                               "object": {"dim": 512, "variable_length": True}}

    # 3. an ordinary dataset for the Hugging Face datasets library
    loaded = datasets.load_dataset(str(out), "captions", cache_dir=str(tmp_path / "hf"))
    assert set(loaded) == {"train", "validation", "test"}
    assert all(len(loaded[split]) > 0 for split in loaded)  # every split has videos
    got = [r for split in loaded.values() for r in split]
    assert len(got) == len(rows)
    expected = {(r["video_id"] if r["start"] == "" else f"{r['video_id']}_{r['start']:.2f}_"
                 f"{r['end']:.2f}", r["lang"], r["text"]) for r in rows}
    assert {(r["video_id"], r["lang"], r["text"]) for r in got} == expected
    times = {r["video_id"]: (r["start"], r["end"]) for r in got}
    for video_id, (_, start, end) in segment_ids.items():
        assert times[video_id] == pytest.approx((start, end))  # times in the source file
    for stem, _, frames, _ in FILES:
        assert times[stem][0] == 0.0 and times[stem][1] == pytest.approx(frames / FPS, abs=0.1)

    # 4. one epoch of training on it
    runs = tmp_path / "runs"
    train.main(["--dataset", str(out), "--epochs", "1", "--output-dir", str(runs / "mine"),
                "--set", "data.batch_size=8", "--set", "model.shared_dim=16"])
    assert (runs / "mine" / "metrics.json").is_file()

    # 5. python -m app --dataset OUT --media DIR, served, searched like the page does
    served = {}

    def launch(demo, **kwargs):
        served["demo"] = demo
        return real_launch(demo, host="127.0.0.1", port=free_port(),
                           prevent_thread_lock=True, quiet=True)

    real_launch = app.ui.launch_app
    monkeypatch.setattr(app.ui, "launch_app", launch)
    monkeypatch.setenv("RUDDER_CACHE", str(tmp_path / "cache"))
    app_cli.main(["--dataset", str(out), "--media", str(src), "--runs", str(runs),
                  "--db", str(tmp_path / "labels.sqlite")])
    demo = served["demo"]
    try:
        from gradio_client import Client

        base = demo.local_url
        client = Client(base, verbose=False, analytics_enabled=False)
        for _ in range(120):  # thumbnails not made within a search's budget come later
            status, table, pick = client.predict(
                "square moves", "en", "en", 50, False, "en", api_name="/search")
            if not any("preparing the thumbnail" in row[0] for row in table["data"]):
                break
            time.sleep(0.5)
        player = client.predict(pick["value"], api_name="/play")  # the page's second event
        assert "English" in status and "⚠" not in status, status
        columns = table["headers"]
        assert columns[:3] == ["thumbnail", "rank", "video"]
        hits = [dict(zip(columns, row, strict=True)) for row in table["data"]]
        assert {h["video"] for h in hits} == set(media)  # every video and segment is found
        assert "<video" in player

        by_id = {r["video_id"]: r for r in got if r["lang"] == "en"}
        for hit in hits:
            video_id = hit["video"]
            name, start, end = segment_ids.get(video_id) or (
                next(s + x for s, x, *_ in FILES if s == video_id), *times[video_id])
            assert hit["segment (s)"] == f"{start:.1f}–{end:.1f}"
            # the thumbnail: a JPEG the server hands out, showing the segment's middle frame
            cell = hit["thumbnail"]
            assert cell.startswith("![segment of ") and "](gradio_api/file=" in cell, cell
            url = base + cell.split("](", 1)[1][:-1]
            with urllib.request.urlopen(url, timeout=30) as response:
                image = Image.open(io.BytesIO(response.read()))
                image.load()
            assert image.format == "JPEG" and image.size == (THUMB_WIDTH, THUMB_WIDTH * 48 // 64)
            left = np.asarray(image.convert("RGB"))[10:-10, 10:70]
            shown = read_index(left)
            assert shown == _first_frame_at((start + end) / 2) % 36, (video_id, shown)
            # the player: the source file at the caption's segment (#t=start,end), or for a
            # Matroska file (browsers do not play it) its H.264/AAC copy
            caption_id = by_id[video_id]["caption_id"]
            html = client.predict(caption_id, api_name="/play")
            assert f"data-segment-end='{end:.2f}'" in html
            if name.endswith(".mkv"):
                copy = demo.rudder_collection.playback.wait(src / name, timeout=120).path
                assert copy.suffix == ".mp4" and copy.parent.name == "playback"
                quoted = urllib.parse.quote(str(copy), safe="/")
                assert f"gradio_api/file={quoted}#t={start:.2f},{end:.2f}" in html, html
                with urllib.request.urlopen(f"{base}gradio_api/file={quoted}",
                                            timeout=30) as got_file:
                    assert got_file.headers["content-type"] == "video/mp4"
                continue
            quoted = urllib.parse.quote(str((src / name).resolve()), safe="/")
            assert f"gradio_api/file={quoted}#t={start:.2f},{end:.2f}" in html, html
            with urllib.request.urlopen(f"{base}gradio_api/file={quoted}", timeout=30) as got_file:
                assert got_file.read() == (src / name).read_bytes()  # the file itself is served

        # the same in Hindi: a Hindi query, Hindi captions shown, the same segments
        status, table, _ = client.predict(
            "वर्ग चलता है", "hi", "hi", 50, False, "en", api_name="/search")
        assert "Hindi" in status and "⚠" not in status, status
        hits = [dict(zip(table["headers"], row, strict=True)) for row in table["data"]]
        assert {h["video"] for h in hits} == set(media) and {h["lang"] for h in hits} == {"hi"}
        for hit in hits:
            start, end = times[hit["video"]]
            assert hit["segment (s)"] == f"{start:.1f}–{end:.1f}"
            assert hit["caption"] in {r["text"] for r in got if r["video_id"] == hit["video"]}
    finally:
        demo.close()
