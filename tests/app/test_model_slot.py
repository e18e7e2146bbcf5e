"""The first model's progress on the page: the encoder's pass over the captions, then epochs."""

import io
import json
import time

from app.model_slot import ModelSlot
from rudder.text.encoding_progress import EncodingProgress


def test_the_page_shows_the_encoding_pass_then_the_epochs(tmp_path):
    run = tmp_path / "run"
    run.mkdir()
    slot = ModelSlot(run_dir=run, epochs=20)
    with slot.encoding_progress():
        with EncodingProgress(8161, "mE5", "/cache/e5",
                              stream=io.StringIO()) as report:
            report.update(2048)
            text = slot.progress_markdown()
            assert "encoding captions with mE5: 2,048 of 8,161" in text
            assert "once (then cached); then at most 20 epochs" in text
            assert "/s, about " in text and "left\\)" in text  # markdown-escaped brackets
            assert "id='rudder-encoding-bar' value='2048' max='8161'" in slot.progress_html()
            report.update(8161 - 2048)
        text = slot.progress_markdown()  # the pass is over: the epochs
        assert "encoding" not in text and "epoch 1 of at most 20; 0 of at most 20" in text
        assert "rudder-training-bar" in slot.progress_html()
    assert slot.training_started is not None
    slot.training_started -= 30  # the first epoch took 30 s after the pass
    slot._last_epoch = (0, slot.training_started)
    (run / "metrics.jsonl").write_text(json.dumps({"epoch": 1, "t2v": {}}) + "\n")
    assert "at most about 570 s of training left" in slot.progress_markdown()


def test_the_slot_stops_listening_when_training_ends():
    slot = ModelSlot(run_dir=None, epochs=2)
    with slot.encoding_progress():
        pass
    with EncodingProgress(500, "m", "/c", stream=io.StringIO()) as report:
        report.update(100)
    assert slot.encoding is None and "encoding" not in slot.progress_markdown()
    assert time.monotonic() >= slot.started
