"""What the sentence-encoder pass says: a first line, progress lines or a bar, a last line,
and the same stage to listeners (the app)."""

import io

import numpy as np
import pytest

from rudder.text import encoding_progress
from rudder.text.encoders import SentenceFeatures
from rudder.text.encoding_progress import EncodingProgress, duration


class Clock:
    def __init__(self):
        self.now = 0.0

    def __call__(self):
        return self.now


class Slow:
    """A backend at 2 texts a second on the fake clock."""

    model_id, weights_hash, dim, prompt, name = "slow/model", "ab" * 32, 2, "", "slow-e5"

    def __init__(self, clock):
        self.clock = clock

    def encode(self, texts):
        self.clock.now += len(texts) / 2
        return np.ones((len(texts), 2), np.float32)


class Terminal(io.StringIO):
    def isatty(self):
        return True


def test_a_small_encoding_reports_count_rate_estimate_and_cache(tmp_path, monkeypatch):
    monkeypatch.setenv("RUDDER_CACHE", str(tmp_path))
    clock, log = Clock(), io.StringIO()
    seen = []
    monkeypatch.setattr(encoding_progress.sys, "stderr", log)
    monkeypatch.setattr(encoding_progress.time, "monotonic", clock)
    encoding_progress.add_listener(seen.append)
    try:
        features = SentenceFeatures(Slow(clock))
        texts = [f"caption {i}" for i in range(300)]
        features.vectors(texts + texts[:10])  # 300 distinct texts
        lines = log.getvalue().splitlines()
        assert lines[0] == (f"encoding 300 captions with slow-e5: once, then cached in "
                            f"{features.cache.folder}")
        # a line at most every 30 s of the fake clock: batches of 64 texts take 32 s
        assert lines[1:-1] == [
            f"encoding captions with slow-e5: {done} of 300 (2/s, about {left} left)"
            for done, left in ((64, "2 min"), (128, "86 s"), (192, "54 s"), (256, "22 s"))]
        assert lines[-1] == (f"encoded 300 captions with slow-e5; cached in "
                             f"{features.cache.folder} (3 min)")
        assert [s.done for s in seen] == [0, 64, 128, 192, 256, 300, 300]
        assert seen[-1].finished and seen[2].rate == pytest.approx(2.0)
        assert seen[2].left_s == pytest.approx((300 - 128) / 2)
        log.truncate(0)
        log.seek(0)
        features.vectors(texts)  # cached: nothing to say
        assert log.getvalue() == ""
    finally:
        encoding_progress.remove_listener(seen.append)


def test_a_terminal_gets_a_bar_and_few_texts_stay_silent():
    terminal = Terminal()
    with EncodingProgress(150, "m", "/cache", stream=terminal) as report:
        report.update(150)
    assert "encoding captions:" in terminal.getvalue() and "/150" in terminal.getvalue()
    quiet = io.StringIO()
    with EncodingProgress(5, "m", "/cache", stream=quiet) as report:
        report.update(5)
    assert quiet.getvalue() == ""


def test_durations_read_as_people_say_them():
    assert [duration(s) for s in (0.2, 40, 95, 250, 3900)] == [
        "1 s", "40 s", "2 min", "5 min", "1 h 5 min"]
