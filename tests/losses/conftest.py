"""Small hand-checkable batches shared by the loss tests.

S3 (rows captions, columns videos; diagonal positive):

        v0   v1   v2
    c0 0.9  0.5  0.2
    c1 0.6  0.7  0.1
    c2 0.3  0.8  0.4

Anchor views (docs/architecture.md's anchor/candidate rule): caption anchor a reads row a,
video anchor a reads column a.
    caption anchors: c0 -> {v1: 0.5, v2: 0.2}, c1 -> {v0: 0.6, v2: 0.1}, c2 -> {v0: 0.3, v1: 0.8}
    video anchors:   v0 -> {c1: 0.6, c2: 0.3}, v1 -> {c0: 0.5, c2: 0.8}, v2 -> {c0: 0.2, c1: 0.1}
    positives: s00 = 0.9, s11 = 0.7, s22 = 0.4

R3 (relevance of caption i to video j; a video anchor a reads R3[b, a]):

        v0   v1   v2
    c0 1.0  0.2  0.0
    c1 0.1  0.8  0.5
    c2 0.0  0.3  0.6

S2 = [[0.8, 0.7], [0.3, 0.6]] is a 2 x 2 batch: every anchor has exactly one negative,
so the sampling losses are deterministic on it.
"""

import pytest
import torch

S3 = [[0.9, 0.5, 0.2], [0.6, 0.7, 0.1], [0.3, 0.8, 0.4]]
R3 = [[1.0, 0.2, 0.0], [0.1, 0.8, 0.5], [0.0, 0.3, 0.6]]
S2 = [[0.8, 0.7], [0.3, 0.6]]


@pytest.fixture
def s3():
    return torch.tensor(S3, dtype=torch.float64)


@pytest.fixture
def r3():
    return torch.tensor(R3, dtype=torch.float64)


@pytest.fixture
def s2():
    return torch.tensor(S2, dtype=torch.float64)


def random_batch(size: int, seed: int = 0, dim: int = 16):
    """Cosine similarities of random unit vectors (captions x videos), float64."""
    gen = torch.Generator().manual_seed(seed)
    normalize = torch.nn.functional.normalize
    text = normalize(torch.randn(size, dim, generator=gen, dtype=torch.float64), dim=1)
    video = normalize(text + torch.randn(size, dim, generator=gen, dtype=torch.float64), dim=1)
    return text, video, text @ video.T
