"""Progress bars: drawn on a terminal, silent otherwise; the steps they count give the same
results whatever their chunking."""

import io
import sys

import numpy as np
import torch

from rudder.data.token_store import store_from_encoder
from rudder.progress import progress


class Terminal(io.StringIO):
    def isatty(self):
        return True


def test_progress_is_drawn_on_a_terminal_only():
    terminal, log = Terminal(), io.StringIO()
    for stream in (terminal, log):
        with progress(total=3, desc="encoding things", unit="caption", stream=stream) as bar:
            bar.update(3)
    assert "encoding things:" in terminal.getvalue() and "/3 " in terminal.getvalue()
    assert log.getvalue() == ""


def fake_encoder(calls):
    """Token vectors: caption i has (i % 3) + 1 tokens whose values are i."""

    def encode(texts, video_ids=None, ordinals=None):
        calls.append(len(texts))
        lengths = [int(t) % 3 + 1 for t in texts]
        width = max(lengths)
        features = torch.zeros(len(texts), width, 2)
        mask = torch.zeros(len(texts), width, dtype=torch.bool)
        for row, (text, length) in enumerate(zip(texts, lengths, strict=True)):
            features[row, :length] = float(text)
            mask[row, :length] = True
        return features, mask

    return encode


def test_store_from_encoder_counts_captions_and_ignores_the_chunking(monkeypatch):
    texts = [str(i) for i in range(10)]
    owner, slot = np.arange(10) // 2, np.arange(10) % 2
    stores = []
    for chunk in (3, 100):
        calls = []
        terminal = Terminal()
        monkeypatch.setattr(sys, "stderr", terminal)
        stores.append(store_from_encoder(fake_encoder(calls), texts, texts, np.zeros(10),
                                         owner, slot, (5, 2), chunk=chunk, desc="encoding test"))
        assert calls == ([3, 3, 3, 1] if chunk == 3 else [10])
        assert "encoding test:" in terminal.getvalue() and "/10 " in terminal.getvalue()
    assert torch.equal(stores[0].flat, stores[1].flat)
    assert torch.equal(stores[0].index, stores[1].index)
    features, mask = stores[0].gather(torch.tensor([4]), torch.tensor([1]))
    assert mask.sum() == 9 % 3 + 1 and (features[mask] == 9.0).all()  # caption 9: 1 token of 9s
