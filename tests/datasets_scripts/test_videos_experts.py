"""The video-expert registry: specs, weights files, torchvision-compatible parameter names,
the log-mel front end against a direct loop, VGGish's layout."""

import numpy as np
import pytest
import torch

from datasets_scripts import audio_features as audio
from datasets_scripts import video_nets
from datasets_scripts.build_report import BuildError
from datasets_scripts.video_experts import load_expert, parse_spec, sha256_of
from datasets_scripts.video_pipeline import _clips

# Keys of torchvision's / torchvggish's released state dicts (a sample of each file's).
TORCHVISION_KEYS = {
    "resnet18": ["conv1.weight", "bn1.running_var", "layer1.1.conv2.weight",
                 "layer2.0.downsample.0.weight", "layer2.0.downsample.1.running_mean",
                 "layer4.1.bn2.bias", "fc.weight", "fc.bias"],
    "resnet50": ["layer1.0.conv3.weight", "layer1.0.bn3.weight", "layer1.0.downsample.0.weight",
                 "layer3.5.conv2.weight", "layer4.2.bn3.running_var", "fc.weight"],
    "r2plus1d_18": ["stem.0.weight", "stem.1.running_mean", "stem.3.weight", "stem.4.bias",
                    "layer1.0.conv1.0.0.weight", "layer1.0.conv1.0.1.weight",
                    "layer1.0.conv1.0.3.weight", "layer1.0.conv1.1.running_var",
                    "layer2.0.downsample.0.weight", "layer4.1.conv2.0.3.weight", "fc.bias"],
}
PARAMETERS = {"resnet18": 11_689_512, "resnet50": 25_557_032, "r2plus1d_18": 31_505_325}


@pytest.mark.parametrize("arch", sorted(PARAMETERS))
def test_networks_have_torchvision_names_and_sizes(arch):
    model = getattr(video_nets, arch)()
    state = model.state_dict()
    assert set(TORCHVISION_KEYS[arch]) <= set(state)
    assert sum(p.numel() for p in model.parameters()) == PARAMETERS[arch]
    if arch == "r2plus1d_18":  # (2+1)D midplanes: floor(27 * 64 * 64 / (9 * 64 + 3 * 64)) = 144
        assert state["layer1.0.conv1.0.0.weight"].shape == (144, 64, 1, 3, 3)


def test_vggish_layout_matches_torchvggish():
    model = video_nets.VGGish()
    assert sum(p.numel() for p in model.parameters()) == 72_141_184
    names = set(model.state_dict())
    assert {"features.0.weight", "features.13.bias", "features.8.weight", "embeddings.0.weight",
            "embeddings.4.bias"} <= names
    assert model(torch.zeros(3, 1, 96, 64)).shape == (3, 128)


def test_spec_forms_and_their_errors():
    assert parse_spec("object=resnet50").weights == "hub"
    assert parse_spec("object=resnet50@random").weights == "random"
    assert parse_spec("object=resnet50@/w/r.pth").weights == "/w/r.pth"
    assert parse_spec("audio=logmel").weights is None
    assert parse_spec("scene=open_clip:ViT-B-32/openai@hub").arch == "open_clip:ViT-B-32/openai"
    bad = {
        "resnet50": "use NAME=SPEC",
        "object=resnet99": "unknown architecture 'resnet99'",
        "audio=logmel@hub": "logmel has no weights",
        "object=resnet50@": "nothing after '@'",
        "Object=resnet50": "bad expert name",
        "x=open_clip:": "name the model",
    }
    for text, message in bad.items():
        with pytest.raises(BuildError, match=message):
            parse_spec(text)


def test_weights_file_is_loaded_and_hashed(tmp_path):
    torch.manual_seed(1)
    source = video_nets.resnet18()
    path = tmp_path / "r18.pth"
    torch.save({f"module.{k}": v for k, v in source.state_dict().items()}, path)
    expert = load_expert(parse_spec(f"object=resnet18@{path}"), fps=1.0)
    assert expert.weights_sha256 == sha256_of(path)
    assert expert.record()["weights"] == "r18.pth"
    frames = np.random.default_rng(0).integers(0, 255, (2, 64, 64, 3), dtype=np.uint8)
    source.fc = torch.nn.Identity()
    x = (torch.from_numpy(frames).float() / 255 - torch.tensor(expert.arch.mean_std[0])) / (
        torch.tensor(expert.arch.mean_std[1]))
    with torch.no_grad():
        want = source.eval()(x.permute(0, 3, 1, 2)).numpy()
    assert np.allclose(expert.encode(frames), want, atol=1e-5)


def test_wrong_or_missing_weights_are_named(tmp_path):
    path = tmp_path / "vggish.pth"
    torch.save(video_nets.VGGish().state_dict(), path)
    with pytest.raises(BuildError, match="does not fit resnet18: missing"):
        load_expert(parse_spec(f"object=resnet18@{path}"), fps=1.0)
    with pytest.raises(BuildError, match="no such weights file"):
        load_expert(parse_spec(f"object=resnet18@{tmp_path / 'nope.pth'}"), fps=1.0)
    (tmp_path / "junk.pth").write_bytes(b"junk")
    with pytest.raises(BuildError, match="cannot be read, it is truncated or corrupt"):
        load_expert(parse_spec(f"object=resnet18@{tmp_path / 'junk.pth'}"), fps=1.0)


def test_hub_offline_fails_fast_with_the_fix(tmp_path, monkeypatch):
    monkeypatch.setenv("TORCH_HOME", str(tmp_path))
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    with pytest.raises(BuildError) as error:
        load_expert(parse_spec("motion=r2plus1d_18@hub"), fps=1.0)
    text = str(error.value)
    assert text.startswith("motion=r2plus1d_18@hub: the weights are not in the cache")
    assert "HF_HUB_OFFLINE" in text and "r2plus1d_18-91a641e6.pth" in text
    assert "@/path/to/" in text and "@random" in text


def test_cached_hub_weights_are_used_offline(tmp_path, monkeypatch):
    monkeypatch.setenv("TORCH_HOME", str(tmp_path))
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    (tmp_path / "hub" / "checkpoints").mkdir(parents=True)
    cached = tmp_path / "hub" / "checkpoints" / "vggish-10086976.pth"
    torch.save(video_nets.VGGish().state_dict(), cached)
    expert = load_expert(parse_spec("audio=vggish@hub"), fps=1.0)
    assert expert.weights_sha256 == sha256_of(cached)
    assert expert.encode(np.zeros((2, 96, 64), np.float32)).shape == (2, 128)


def test_open_clip_without_the_package_names_it():
    try:
        import open_clip  # noqa: F401
    except ImportError:
        with pytest.raises(BuildError, match="pip install open_clip_torch"):
            load_expert(parse_spec("scene=open_clip:ViT-B-32@random"), fps=1.0)
    else:
        pytest.skip("open_clip is installed")


def test_torchvision_classes_are_used_when_torchvision_imports(monkeypatch):
    import sys
    import types

    made = []

    def fake_resnet18():
        made.append("torchvision")
        return video_nets.resnet18()

    package = types.ModuleType("torchvision")
    models = types.ModuleType("torchvision.models")
    models.resnet18 = fake_resnet18
    package.models = models
    models.video = types.ModuleType("torchvision.models.video")
    for name, module in (("torchvision", package), ("torchvision.models", models),
                         ("torchvision.models.video", models.video)):
        monkeypatch.setitem(sys.modules, name, module)
    load_expert(parse_spec("object=resnet18@random"), fps=1.0)
    assert made == ["torchvision"]


def test_open_clip_adapter_with_a_stand_in_package(tmp_path, monkeypatch):
    import sys
    import types

    calls = []

    class Visual(torch.nn.Module):
        image_size = (32, 32)
        output_dim = 8
        image_mean, image_std = (0.5, 0.5, 0.5), (0.25, 0.25, 0.25)

    class Model(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.visual = Visual()
            self.proj = torch.nn.Linear(3, 8)

        def encode_image(self, x):
            return self.proj(x.mean(dim=(2, 3)))

    def create_model(name, pretrained=None, device="cpu"):
        calls.append((name, pretrained))
        return Model()

    monkeypatch.setitem(sys.modules, "open_clip",
                        types.SimpleNamespace(create_model=create_model))
    expert = load_expert(parse_spec("scene=open_clip:ViT-B-32/laion2b@hub"), fps=2.0)
    assert calls == [("ViT-B-32", "laion2b")]
    assert expert.dim == 8 and expert.group == ("frames", 2.0, 32, 32)
    assert expert.encode(np.zeros((3, 32, 32, 3), np.uint8)).shape == (3, 8)
    path = tmp_path / "clip.bin"
    path.write_bytes(b"weights")
    record = load_expert(parse_spec(f"scene=open_clip:ViT-B-32@{path}"), fps=1.0).record()
    assert calls[-1] == ("ViT-B-32", str(path)) and record["weights_sha256"] == sha256_of(path)


def test_random_weights_are_seeded_and_said_so():
    a = load_expert(parse_spec("object=resnet18@random"), fps=2.0)
    b = load_expert(parse_spec("object=resnet18@random"), fps=2.0)
    frames = np.full((1, 32, 32, 3), 128, np.uint8)
    assert np.array_equal(a.encode(frames), b.encode(frames))
    record = a.record()
    assert record["weights"].startswith("random") and record["fps"] == 2.0
    assert record["frame_size"] == [224, 224] and record["weights_sha256"] is None


def test_clips_pad_with_the_last_frame():
    frames = np.arange(20)[:, None, None, None] * np.ones((1, 2, 2, 3), np.uint8)
    clips = _clips(frames, 16)
    assert clips.shape == (2, 16, 2, 2, 3)
    assert clips[1, :4, 0, 0, 0].tolist() == [16, 17, 18, 19]
    assert (clips[1, 4:, 0, 0, 0] == 19).all()


# -------------------------------------------------------------------------- log-mel
def _log_mel_loop(samples):
    """VGGish's front end written out frame by frame (mel_features.py's definitions)."""
    frames = []
    mel = audio.mel_matrix()
    for start in range(0, len(samples) - 400 + 1, 160):
        window = [samples[start + n] * (0.5 - 0.5 * np.cos(2 * np.pi * n / 400))
                  for n in range(400)]
        spectrum = np.abs(np.fft.rfft(window, 512))
        frames.append(np.log(spectrum @ mel + 0.01))
    return np.array(frames)


def test_log_mel_matches_a_direct_loop():
    samples = np.random.default_rng(0).normal(0, 0.1, 2000)
    assert np.allclose(audio.log_mel(samples), _log_mel_loop(samples), atol=1e-9)


def test_mel_filters_are_htk_triangles():
    weights = audio.mel_matrix()
    assert weights.shape == (257, 64) and (weights[0] == 0).all()
    hz = np.linspace(0, 8000, 257)
    centres = hz[weights.argmax(axis=0)]
    assert 125 < centres[0] < 200 and 7000 < centres[-1] < 7500
    assert (np.diff(centres) >= 0).all() and weights.max() <= 1


def test_patches_count_and_tone_band():
    rate = audio.RATE
    tone = np.sin(2 * np.pi * 1000 * np.arange(3 * rate) / rate).astype(np.float32)
    p = audio.patches(tone)  # 48,000 samples: 1 + (48000 - 15600) // 15360 = 3 patches
    assert p.shape == (3, 96, 64)
    stats = audio.logmel_statistics(p)
    assert stats.shape == (3, 128)
    band = np.argmax(stats[0, :64])
    hz = np.linspace(0, 8000, 257)[audio.mel_matrix()[:, band].argmax()]
    assert abs(hz - 1000) < 100
    assert np.allclose(stats[:, 64:], p.std(axis=1))
    assert audio.patches(tone[:1000]).shape == (1, 96, 64)  # padded with silence


def test_patch_stream_equals_whole_segment_patches():
    samples = np.random.default_rng(1).normal(0, 0.2, 70_000).astype(np.float32)
    stream = audio.PatchStream()
    parts = [stream.add(samples[i : i + 7000]) for i in range(0, len(samples), 7000)]
    parts.append(stream.finish())
    assert np.array_equal(np.concatenate(parts), audio.patches(samples))
    short = audio.PatchStream()
    assert len(short.add(samples[:5000])) == 0
    assert np.array_equal(short.finish(), audio.patches(samples[:5000]))


def test_vggish_runs_on_decoded_patches(tmp_path):
    from datasets_scripts.video_pipeline import Extractor, decode_task

    from .video_files import write_video

    path = write_video(tmp_path / "v.mp4", frames=36, fps=12)  # 3 s of tone
    expert = load_expert(parse_spec("audio=vggish@random"), fps=1.0)
    extractor = Extractor([expert])
    store = {}
    for message in decode_task(extractor.task("v", path, [(None, None), (0.5, 1.0)])):
        extractor.features(message, store)
    whole = np.concatenate(store[("audio", 0)])
    short = np.concatenate(store[("audio", 1)])
    assert whole.shape == (3, 128) and short.shape == (1, 128)  # 0.5 s padded to one patch


def test_a_crashing_worker_fails_its_video_only(tmp_path):
    from datasets_scripts.video_pipeline import Task, run_tasks

    from .video_files import write_video

    path = str(write_video(tmp_path / "v.mp4", audio=False))
    good = Task("good", path, [(None, None)], [(1.0, 48, 32)], None)
    # a frame group the decoder cannot unpack: the worker process dies with a traceback
    broken = Task("broken", path, [(None, None)], [("not", "a", "group", "!")], None)
    later = Task("later", path, [(None, None)], [(1.0, 48, 32)], None)
    messages = list(run_tasks([good, broken, later], workers=1))
    ends = {m[1]: m for m in messages if m[0] in ("done", "error")}
    assert ends["good"][0] == "done" and ends["later"][0] == "done"
    assert ends["broken"][0] == "error" and "the decoder crashed (exit code 1)" in ends["broken"][2]
