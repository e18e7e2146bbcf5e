"""The registry of video experts for ``build videos``: ``--expert NAME=SPEC``.

``SPEC`` is ``ARCH``, ``ARCH@/path/to/weights``, ``ARCH@hub`` or ``ARCH@random``:

- ``ARCH@/path``: a local state-dict file (``torch.load(weights_only=True)``, no code runs),
  recorded with its SHA-256;
- ``ARCH@hub`` (also plain ``ARCH``): the published weights, downloaded once into torch's
  hub cache (``$TORCH_HOME/hub/checkpoints``); offline (``HF_HUB_OFFLINE=1`` or the server
  does not answer) it fails at once, naming the URL to fetch elsewhere and the ``@/path``
  form to use it;
- ``ARCH@random``: a seeded random initialisation, for pipeline checks only (the card says
  so loudly).

Architectures (:data:`ARCHITECTURES`): ``resnet18``/``resnet50`` (ImageNet, one vector per
frame at ``--fps``), ``r2plus1d_18`` (Kinetics-400, one vector per 16-frame clip at 15 fps),
``vggish`` (AudioSet, one vector per 0.96 s; weights from torchvggish), the weight-free
``logmel`` (log-mel statistics per 0.96 s) and ``open_clip:<model>[/<pretrained tag>]``
(needs the ``open_clip_torch`` package). torchvision's own model classes are used when
torchvision imports; otherwise :mod:`datasets_scripts.video_nets`, which has the same
parameter names. Every expert's :meth:`LoadedExpert.record` (architecture, weights and
their SHA-256, frame rate, frame size, sampling rate) goes into ``rudder.json``.
"""

from __future__ import annotations

import hashlib
import os
import socket
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import urlparse

import numpy as np

from .build_report import BuildError
from .cards import portable

IMAGENET = ((0.485, 0.456, 0.406), (0.229, 0.224, 0.225))
KINETICS = ((0.43216, 0.394666, 0.37645), (0.22803, 0.22145, 0.216989))
CLIP_MEAN_STD = ((0.48145466, 0.4578275, 0.40821073), (0.26862954, 0.26130258, 0.27577711))
VGGISH_URL = "https://github.com/harritaylor/torchvggish/releases/download/v0.1/vggish-10086976.pth"


@dataclass(frozen=True)
class Arch:
    """How an architecture samples its input and what it returns."""

    name: str
    kind: str  # "image" (a frame), "clip" (16 frames), "audio" (0.96 s log-mel patches)
    dim: int
    url: str | None  # published weights (None: weight-free)
    resize: int = 0  # shorter side before the centre crop
    crop: int = 0
    fps: float | None = None  # None: the build's --fps
    clip_frames: int = 0
    rate: int = 0  # audio sampling rate
    mean_std: tuple = IMAGENET


ARCHITECTURES = {
    "resnet18": Arch("resnet18", "image", 512,
                     "https://download.pytorch.org/models/resnet18-f37072fd.pth", 256, 224),
    "resnet50": Arch("resnet50", "image", 2048,
                     "https://download.pytorch.org/models/resnet50-0676ba61.pth", 256, 224),
    "r2plus1d_18": Arch("r2plus1d_18", "clip", 512,
                        "https://download.pytorch.org/models/r2plus1d_18-91a641e6.pth",
                        128, 112, fps=15.0, clip_frames=16, mean_std=KINETICS),
    "vggish": Arch("vggish", "audio", 128, VGGISH_URL, rate=16000),
    "logmel": Arch("logmel", "audio", 128, None, rate=16000),
}
DEFAULT_EXPERTS = ("object=resnet50@hub", "motion=r2plus1d_18@hub", "audio=logmel")


@dataclass(frozen=True)
class ExpertSpec:
    name: str  # the dataset's expert name, e.g. "object"
    arch: str  # e.g. "resnet50", "open_clip:ViT-B-32/openai"
    weights: str | None  # "hub", "random", a path, or None (weight-free)
    text: str  # as given


def parse_spec(text: str) -> ExpertSpec:
    """``NAME=ARCH[@WEIGHTS]`` -> :class:`ExpertSpec`, or a BuildError with the fix."""
    from rudder.data.layout import LayoutError, parse_expert

    name, sep, spec = text.partition("=")
    if not sep or not name or not spec:
        raise BuildError(f"--expert {text!r}: use NAME=SPEC, e.g. object=resnet50@hub")
    try:
        parse_expert(name)
    except LayoutError as error:
        raise BuildError(f"--expert {text!r}: {error}") from None
    arch, at, weights = spec.partition("@")
    if not arch.startswith("open_clip:") and arch not in ARCHITECTURES:
        known = ", ".join([*ARCHITECTURES, "open_clip:<model>"])
        raise BuildError(f"--expert {text!r}: unknown architecture {arch!r}; known: {known}")
    if arch.startswith("open_clip:") and len(arch) == len("open_clip:"):
        raise BuildError(f"--expert {text!r}: name the model, e.g. open_clip:ViT-B-32/openai")
    info = ARCHITECTURES.get(arch)
    if info is not None and info.url is None:
        if at:
            raise BuildError(f"--expert {text!r}: {arch} has no weights; write just {arch}")
        return ExpertSpec(name, arch, None, text)
    if at and not weights:
        raise BuildError(f"--expert {text!r}: nothing after '@' (use @hub, @random or @PATH)")
    return ExpertSpec(name, arch, weights or "hub", text)


def sha256_of(path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        for block in iter(lambda: handle.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def _offline_reason(url: str, timeout: float = 3.0) -> str | None:
    """Why ``url`` cannot be downloaded now (``HF_HUB_OFFLINE`` or no answer), else None."""
    from rudder.hub.offline import offline_setting

    if offline_setting():
        return "HF_HUB_OFFLINE is set"
    host = urlparse(url).hostname
    try:
        socket.create_connection((host, 443), timeout=timeout).close()
    except OSError as error:
        return f"{host} does not answer ({error.strerror or error})"
    return None


def hub_weights(spec: str, url: str) -> Path:
    """The cached file of ``url`` (downloaded when missing and online) for the expert
    ``spec`` (``object=resnet50@hub``, named in the errors)."""
    import torch.hub

    target = Path(torch.hub.get_dir()) / "checkpoints" / os.path.basename(urlparse(url).path)
    if target.is_file():
        return target
    reason = _offline_reason(url)
    if reason:
        raise BuildError(
            f"{spec}: the weights are not in the cache ({target}) and cannot be "
            f"downloaded ({reason}). Fetch {url} on a machine that is online, then pass "
            f"@/path/to/{target.name} (or copy it to {target}); @random checks the pipeline "
            "without weights"
        )
    target.parent.mkdir(parents=True, exist_ok=True)
    # torchvision's file names end in the first hex digits of the file's SHA-256
    stem = target.stem.rsplit("-", 1)
    prefix = stem[1] if "download.pytorch.org" in url and len(stem) == 2 else None
    try:
        torch.hub.download_url_to_file(url, str(target), hash_prefix=prefix, progress=True)
    except (OSError, RuntimeError) as error:
        raise BuildError(f"{spec}: downloading {url} failed ({error})") from None
    return target


def _torchvision_model(arch: str):
    """torchvision's class for ``arch`` when torchvision imports, else None."""
    try:
        from torchvision import models
        from torchvision.models import video
    except Exception:  # noqa: BLE001 - absent, or a build that does not match torch
        return None
    return getattr(video if arch == "r2plus1d_18" else models, arch)()


def _build(arch: str):
    from . import video_nets

    if arch == "vggish":
        return video_nets.VGGish()
    return _torchvision_model(arch) or getattr(video_nets, arch)()


def _load_state(model, path: Path, label: str) -> None:
    from rudder.errors import RudderError
    from rudder.runs.checkpoints import read_plain

    try:
        state = read_plain(path)  # tensors and plain values only: no code runs
    except RudderError as error:
        raise BuildError(f"{label}: weights file {error}") from None
    if isinstance(state, dict) and isinstance(state.get("state_dict"), dict):
        state = state["state_dict"]
    if not isinstance(state, dict):
        raise BuildError(f"{label}: {path} is not a state dict")
    state = {k.removeprefix("module."): v for k, v in state.items()}
    result = model.load_state_dict(state, strict=False)
    if result.missing_keys or result.unexpected_keys:
        raise BuildError(
            f"{label}: {path} does not fit {label.split('=')[-1].split('@')[0]}: missing "
            f"{result.missing_keys[:4]}, unexpected {result.unexpected_keys[:4]} (a state dict "
            "saved from the torchvision/torchvggish model of that name is expected)"
        )


@dataclass
class LoadedExpert:
    """An expert ready to encode: the network (None for logmel) and its input settings."""

    spec: ExpertSpec
    arch: Arch
    model: Any = None  # the torch network (open_clip's: through encode_image); None: logmel
    device: str = "cpu"
    weights_sha256: str | None = None
    weights_file: str | None = None
    fps: float | None = None
    extra: dict = field(default_factory=dict)
    _open_clip: bool = False

    @property
    def dim(self) -> int:
        return self.arch.dim

    @property
    def group(self) -> tuple:
        """Experts with the same group share decoded frames (or audio patches)."""
        if self.arch.kind == "audio":
            return ("audio", self.arch.rate)
        return ("frames", self.fps, self.arch.resize, self.arch.crop)

    def record(self) -> dict:
        """What ``rudder.json`` and the card say about this expert."""
        weights = self.spec.weights
        out = {
            "spec": portable(self.spec.text),
            "architecture": self.spec.arch,
            "kind": self.arch.kind,
            "dim": self.dim,
            "weights": "none (weight-free)" if weights is None else (
                "random (pipeline check only)" if weights == "random" else
                (self.arch.url if weights == "hub" else Path(weights).name)),
            "weights_sha256": self.weights_sha256,
        }
        if self.arch.kind == "audio":
            out.update(sampling_rate=self.arch.rate, window_seconds=0.96)
        else:
            out.update(fps=self.fps, frame_size=[self.arch.crop, self.arch.crop],
                       resize_shorter_side=self.arch.resize)
            if self.arch.kind == "clip":
                out["clip_frames"] = self.arch.clip_frames
        return {**out, **self.extra}

    def encode(self, batch: np.ndarray) -> np.ndarray:
        """Features of a batch: ``(n, H, W, 3)`` uint8 frames (image), ``(n, T, H, W, 3)``
        clips, or ``(n, 96, 64)`` log-mel patches (audio) -> ``(n, dim)`` float32."""
        import torch

        if self.spec.arch == "logmel":
            from .audio_features import logmel_statistics

            return logmel_statistics(batch)
        device = torch.device(self.device)
        x = torch.from_numpy(np.ascontiguousarray(batch)).to(device)
        if self.arch.kind == "audio":
            x = x[:, None].float()
        else:
            x = x.float().div_(255)
            mean, std = (torch.tensor(v, device=device) for v in self.arch.mean_std)
            x = (x - mean) / std
            x = x.permute(0, 3, 1, 2) if x.ndim == 4 else x.permute(0, 4, 1, 2, 3)
        with torch.inference_mode(), torch.autocast(
            "cuda", dtype=torch.float16, enabled=device.type == "cuda"
        ):
            out = self.model.encode_image(x) if self._open_clip else self.model(x)
        return out.float().cpu().numpy()


def load_expert(spec: ExpertSpec, fps: float, device: str = "cpu") -> LoadedExpert:
    """Build the network of ``spec`` with its weights on ``device``."""
    if spec.arch.startswith("open_clip:"):
        return _load_open_clip(spec, fps, device)
    import torch
    from torch import nn

    arch = ARCHITECTURES[spec.arch]
    expert = LoadedExpert(spec, arch, device=device, fps=arch.fps or fps)
    if spec.weights is None:
        return expert
    if spec.weights == "random":
        seed = int.from_bytes(hashlib.sha256(spec.arch.encode()).digest()[:4], "little")
        torch.manual_seed(seed)
        model = _build(spec.arch)
        expert.extra["random_seed"] = seed
    else:
        if spec.weights != "hub":
            path = Path(spec.weights)
        elif arch.url is None:  # parse_expert gives a weight-free architecture no weights
            raise BuildError(f"--expert {spec.text}: {spec.arch} has no published weights")
        else:
            path = hub_weights(spec.text, arch.url)
        if not path.is_file():
            raise BuildError(f"--expert {spec.text}: no such weights file {path}")
        model = _build(spec.arch)
        _load_state(model, path, f"--expert {spec.text}")
        expert.weights_sha256 = sha256_of(path)
    if hasattr(model, "fc"):
        model.fc = nn.Identity()  # the pooled features, not the class scores
    expert.model = model.eval().to(device)
    return expert


def _load_open_clip(spec: ExpertSpec, fps: float, device: str) -> LoadedExpert:
    """An ``open_clip`` image tower: ``open_clip:MODEL[/TAG]``; ``@hub`` downloads the
    pretrained ``TAG`` (default ``openai``), ``@PATH`` loads a local checkpoint."""
    try:
        import open_clip
    except ImportError:
        raise BuildError(
            f"--expert {spec.text}: open_clip models need the open_clip_torch package "
            "(pip install open_clip_torch)"
        ) from None
    model_name, _, tag = spec.arch.removeprefix("open_clip:").partition("/")
    weights_sha256 = None
    if spec.weights == "random":
        pretrained = None
    elif spec.weights == "hub":
        from rudder.hub.offline import offline_setting

        pretrained = tag or "openai"
        if offline_setting():
            os.environ.setdefault("HF_HUB_OFFLINE", "1")
    else:
        pretrained = spec.weights
        if pretrained is None or not Path(pretrained).is_file():
            raise BuildError(f"--expert {spec.text}: no such weights file {pretrained}")
        weights_sha256 = sha256_of(pretrained)
    try:
        model = open_clip.create_model(model_name, pretrained=pretrained, device=device)
    except Exception as error:  # noqa: BLE001 - open_clip's errors for names and downloads
        raise BuildError(f"--expert {spec.text}: open_clip cannot load it ({error})") from None
    size = model.visual.image_size
    size = size[0] if isinstance(size, (tuple, list)) else int(size)
    mean = getattr(model.visual, "image_mean", None) or CLIP_MEAN_STD[0]
    std = getattr(model.visual, "image_std", None) or CLIP_MEAN_STD[1]
    arch = Arch(spec.arch, "image", int(model.visual.output_dim), None, size, size,
                mean_std=(tuple(mean), tuple(std)))
    return LoadedExpert(spec, arch, model=model.eval(), device=device, fps=fps,
                        weights_sha256=weights_sha256, _open_clip=True,
                        extra={"pretrained": pretrained if spec.weights == "hub" else None})
