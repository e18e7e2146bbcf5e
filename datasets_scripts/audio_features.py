"""Audio experts' front end (log-mel patches) and the VGGish network.

The front end is VGGish's (Hershey et al., "CNN Architectures for Large-Scale Audio
Classification", ICASSP 2017; reference code ``tensorflow/models``
``research/audioset/vggish/{vggish_input,mel_features,vggish_params}.py``): 16 kHz mono,
magnitude STFT of 25 ms periodic-Hann windows every 10 ms (400 / 160 samples, 512-point
FFT), 64 mel bands over 125-7500 Hz on the HTK mel scale ``1127 ln(1 + f / 700)`` with
triangular filters and the DC bin zeroed, ``log(mel + 0.01)``, then non-overlapping
patches of 96 frames (0.96 s). A patch needs ``400 + 95 * 160 = 15,600`` samples; patches
start every ``96 * 160 = 15,360`` samples. A segment shorter than one patch is padded with
silence to one patch.

- ``logmel`` (weight-free): per patch, the mean and the standard deviation of each of the
  64 bands over its 96 frames -> 128 values per 0.96 s.
- ``vggish``: VGGish's embedding of each patch (:class:`datasets_scripts.video_nets.VGGish`).

NumPy only: the decoding workers import it without torch.
"""

from __future__ import annotations

import numpy as np

RATE = 16000
WINDOW, HOP, FFT = 400, 160, 512
BANDS, LOW_HZ, HIGH_HZ = 64, 125.0, 7500.0
PATCH_FRAMES = 96
PATCH_SAMPLES = WINDOW + (PATCH_FRAMES - 1) * HOP  # 15,600
PATCH_HOP = PATCH_FRAMES * HOP  # 15,360
LOG_OFFSET = 0.01


def _hertz_to_mel(hertz):
    return 1127.0 * np.log(1.0 + np.asarray(hertz, dtype=np.float64) / 700.0)


def mel_matrix() -> np.ndarray:
    """``(FFT // 2 + 1, BANDS)`` triangular weights (``spectrogram_to_mel_matrix``)."""
    bins = FFT // 2 + 1
    bins_mel = _hertz_to_mel(np.linspace(0.0, RATE / 2, bins))
    edges = np.linspace(_hertz_to_mel(LOW_HZ), _hertz_to_mel(HIGH_HZ), BANDS + 2)
    weights = np.empty((bins, BANDS))
    for band in range(BANDS):
        lower, centre, upper = edges[band : band + 3]
        rising = (bins_mel - lower) / (centre - lower)
        falling = (upper - bins_mel) / (upper - centre)
        weights[:, band] = np.maximum(0.0, np.minimum(rising, falling))
    weights[0, :] = 0.0
    return weights


_MEL = mel_matrix()
_HANN = 0.5 - 0.5 * np.cos(2 * np.pi * np.arange(WINDOW) / WINDOW)  # periodic


def log_mel(samples: np.ndarray) -> np.ndarray:
    """``(frames, 64)`` log-mel spectrogram of 16 kHz mono samples (at least one window)."""
    samples = np.asarray(samples, dtype=np.float64)
    count = 1 + (len(samples) - WINDOW) // HOP
    index = np.arange(WINDOW)[None, :] + HOP * np.arange(count)[:, None]
    spectrum = np.abs(np.fft.rfft(samples[index] * _HANN, FFT))
    return np.log(spectrum @ _MEL + LOG_OFFSET)


def patches(samples: np.ndarray) -> np.ndarray:
    """``(n, 96, 64)`` float32 log-mel patches of a segment's samples (module docstring)."""
    samples = np.asarray(samples, dtype=np.float32)
    if len(samples) < PATCH_SAMPLES:
        samples = np.pad(samples, (0, PATCH_SAMPLES - len(samples)))
    count = 1 + (len(samples) - PATCH_SAMPLES) // PATCH_HOP
    spectrogram = log_mel(samples[: (count - 1) * PATCH_HOP + PATCH_SAMPLES])
    return spectrogram[: count * PATCH_FRAMES].reshape(count, PATCH_FRAMES, BANDS).astype(
        np.float32
    )


class PatchStream:
    """Turn a segment's samples, given in pieces, into patches as soon as each is complete
    (bounded memory for long segments); :meth:`finish` pads a segment shorter than one
    patch. Same patches as :func:`patches` on the whole segment."""

    def __init__(self):
        self.buffer = np.zeros(0, np.float32)
        self.count = 0

    def add(self, samples: np.ndarray) -> np.ndarray:
        self.buffer = np.concatenate([self.buffer, samples])
        if len(self.buffer) < PATCH_SAMPLES:
            return np.zeros((0, PATCH_FRAMES, BANDS), np.float32)
        out = patches(self.buffer)
        self.buffer = self.buffer[len(out) * PATCH_HOP :]
        self.count += len(out)
        return out

    def finish(self) -> np.ndarray:
        if self.count or not len(self.buffer):
            return np.zeros((0, PATCH_FRAMES, BANDS), np.float32)
        self.count = 1
        return patches(self.buffer)


def logmel_statistics(batch: np.ndarray) -> np.ndarray:
    """``(n, 96, 64)`` patches -> ``(n, 128)``: each band's mean, then its standard
    deviation (population, ``ddof=0``), over the patch's 96 frames."""
    return np.concatenate([batch.mean(axis=1), batch.std(axis=1)], axis=1).astype(np.float32)
