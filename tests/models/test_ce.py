"""CollaborativeExperts: shapes, norms, missing experts, similarity, gradients, errors."""

import math

import pytest
import torch

from rudder.data.layout import ExpertInfo
from rudder.models import CollaborativeExperts, ModelConfig

EXPERTS = {"scene": ExpertInfo(6), "object": ExpertInfo(5), "audio@mr": ExpertInfo(4, True)}
VOCAB = 20
CONFIG = ModelConfig(shared_dim=8, word_dim=6, text_vlad_clusters=3, video_vlad_clusters=2)


def _model(config=CONFIG, vocab=VOCAB, seed=0):
    torch.manual_seed(seed)
    return CollaborativeExperts(config, EXPERTS, vocab)


def _batch(batch=6, frames=4, words=5, seed=1):
    """Model order is ['audio@mr', 'object', 'scene']; every expert available on >= 2 rows."""
    generator = torch.Generator().manual_seed(seed)
    available = torch.tensor(
        [[1, 1, 1], [1, 0, 1], [0, 1, 1], [1, 1, 0], [0, 0, 1], [1, 1, 1]], dtype=torch.bool
    )[:batch]
    frame_masks = {"audio@mr": torch.ones(batch, frames, dtype=torch.bool)}
    frame_masks["audio@mr"][:, frames - 1] = False
    frame_masks["audio@mr"][~available[:, 0]] = False
    features = {
        "scene": torch.randn(batch, 6, generator=generator),
        "object": torch.randn(batch, 5, generator=generator),
        "audio@mr": torch.randn(batch, frames, 4, generator=generator),
    }
    tokens = torch.randint(2, VOCAB, (batch, words), generator=generator)
    mask = torch.ones(batch, words, dtype=torch.bool)
    mask[::2, words - 2 :] = False
    tokens[~mask] = 0
    return tokens, mask, features, frame_masks, available


def test_shapes_and_unit_norms():
    model = _model()
    assert model.experts == ["audio@mr", "object", "scene"]
    tokens, mask, features, frame_masks, available = _batch()
    text, logits = model.encode_text(tokens, mask)
    video = model.encode_video(features, frame_masks, available)
    assert text.shape == (6, 3, 8) and logits.shape == (6, 3) and video.shape == (6, 3, 8)
    assert torch.allclose(text.norm(dim=-1), torch.ones(6, 3), atol=1e-5)
    assert torch.allclose(video.norm(dim=-1), available.float(), atol=1e-5)
    sims = model(tokens, mask, features, frame_masks, available)
    assert sims.shape == (6, 6) and torch.isfinite(sims).all()
    assert sims.abs().max() <= 1 + 1e-5


def test_forward_is_similarity_of_the_encoders():
    model = _model().eval()
    tokens, mask, features, frame_masks, available = _batch()
    text, logits = model.encode_text(tokens, mask)
    video = model.encode_video(features, frame_masks, available)
    expected = CollaborativeExperts.similarity(text, logits, video, available)
    assert torch.allclose(model(tokens, mask, features, frame_masks, available), expected)


def test_similarity_hand_worked():
    # text: expert 0 -> (1, 0), expert 1 -> (0, 1); logits (0, ln 3) -> w = (1/4, 3/4).
    text = torch.tensor([[[1.0, 0.0], [0.0, 1.0]]])
    logits = torch.tensor([[0.0, math.log(3.0)]])
    # video 0 has both experts, both (1, 0): 1/4 * 1 + 3/4 * 0 = 0.25.
    # video 1 has only expert 1 = (0, 1): weight renormalised to 1 -> 1.0; its expert 0
    # row (-1, 0) would give 1/4 * -1 + 3/4 * 1 = 0.5 if it counted.
    video = torch.tensor([[[1.0, 0.0], [1.0, 0.0]], [[-1.0, 0.0], [0.0, 1.0]]])
    available = torch.tensor([[True, True], [False, True]])
    sims = CollaborativeExperts.similarity(text, logits, video, available)
    assert torch.allclose(sims, torch.tensor([[0.25, 1.0]]), atol=1e-6)


def test_similarity_matches_naive_loop():
    torch.manual_seed(6)
    text = torch.nn.functional.normalize(torch.randn(4, 3, 5), dim=-1)
    video = torch.nn.functional.normalize(torch.randn(5, 3, 5), dim=-1)
    logits = torch.randn(4, 3) * 2
    available = torch.rand(5, 3) < 0.6
    available[:, 1] = True
    expected = torch.zeros(4, 5)
    for t in range(4):
        weights = torch.softmax(logits[t], dim=0)
        for v in range(5):
            num = den = 0.0
            for e in range(3):
                if available[v, e]:
                    num += weights[e] * torch.dot(text[t, e], video[v, e])
                    den += weights[e]
            expected[t, v] = num / den
    sims = CollaborativeExperts.similarity(text, logits, video, available)
    assert torch.allclose(sims, expected, atol=1e-6)


def test_unavailable_expert_features_do_not_change_similarity():
    model = _model().train()
    tokens, mask, features, frame_masks, available = _batch()
    base = model(tokens, mask, features, frame_masks, available)
    changed = {name: value.clone() for name, value in features.items()}
    changed["scene"][~available[:, 2]] = float("nan")
    changed["object"][~available[:, 1]] = 100.0
    changed["audio@mr"][~available[:, 0]] = torch.randn(2, 4, 4)
    changed_masks = {"audio@mr": frame_masks["audio@mr"].clone()}
    changed_masks["audio@mr"][~available[:, 0]] = True  # masked by availability anyway
    again = model(tokens, mask, changed, changed_masks, available)
    assert torch.allclose(again, base, atol=1e-6)
    # an available expert's features do matter (the test can fail)
    changed["scene"][0] += 1.0
    assert not torch.allclose(model(tokens, mask, changed, changed_masks, available), base)


def test_padding_words_and_frames_do_not_change_similarity():
    model = _model().train()
    tokens, mask, features, frame_masks, available = _batch()
    base = model(tokens, mask, features, frame_masks, available)
    tokens2 = torch.cat([tokens, torch.randint(1, VOCAB, (6, 3))], dim=1)
    tokens2[:, :5][~mask] = 7
    mask2 = torch.cat([mask, torch.zeros(6, 3, dtype=torch.bool)], dim=1)
    audio = torch.cat([features["audio@mr"], torch.randn(6, 2, 4)], dim=1)
    audio[:, :4][~frame_masks["audio@mr"]] = float("nan")
    frames2 = torch.cat([frame_masks["audio@mr"], torch.zeros(6, 2, dtype=torch.bool)], dim=1)
    features2 = dict(features, **{"audio@mr": audio})
    again = model(tokens2, mask2, features2, {"audio@mr": frames2}, available)
    assert torch.allclose(again, base, atol=1e-6)


def test_gradients_reach_every_parameter():
    config = ModelConfig(
        shared_dim=8,
        word_dim=6,
        text_vlad_clusters=3,
        video_vlad_clusters=2,
        vlad_ghost_clusters=1,
        gating_g_layers=2,
        gating_hidden_layers=1,
        dropout=0.1,
    )
    model = _model(config).train()
    tokens, mask, features, frame_masks, available = _batch()
    sims = model(tokens, mask, features, frame_masks, available)
    (sims - sims.diag().unsqueeze(1)).clamp_min(-0.5).sum().backward()
    for name, parameter in model.named_parameters():
        assert parameter.grad is not None, name
        assert parameter.grad.abs().sum() > 0, name


def test_frozen_embeddings_get_no_gradient():
    model = _model(ModelConfig(shared_dim=8, word_dim=6, freeze_embeddings=True))
    assert not model.word_embedding.weight.requires_grad
    model(*_batch()).sum().backward()
    assert model.word_embedding.weight.grad is None
    assert model.mixture.weight.grad is not None


def test_one_available_expert_per_video_is_finite():
    model = _model().train()
    tokens, mask, features, frame_masks, _ = _batch()
    available = torch.zeros(6, 3, dtype=torch.bool)
    available[:, 2] = True  # scene only
    frame_masks = {"audio@mr": torch.zeros(6, 4, dtype=torch.bool)}
    video = model.encode_video(features, frame_masks, available)
    assert torch.isfinite(video).all()
    assert torch.equal(video[:, :2], torch.zeros(6, 2, 8))
    sims = model(tokens, mask, features, frame_masks, available)
    text, _ = model.encode_text(tokens, mask)
    # one expert: the similarity is that expert's cosine, whatever the mixture weights
    assert torch.allclose(sims, text[:, 2] @ video[:, 2].T, atol=1e-5)


def test_errors_are_clear():
    model = _model()
    _, _, features, frame_masks, available = _batch()
    empty = available.clone()
    empty[3] = False
    with pytest.raises(ValueError, match=r"batch rows \[3\] have no available expert"):
        model.encode_video(features, frame_masks, empty)
    with pytest.raises(ValueError, match="some videos have no available expert"):
        video = torch.zeros(6, 3, 8)
        CollaborativeExperts.similarity(torch.zeros(2, 3, 8), torch.zeros(2, 3), video, empty)
    no_frames = {"audio@mr": frame_masks["audio@mr"].clone()}
    no_frames["audio@mr"][0] = False
    with pytest.raises(ValueError, match=r"'audio@mr' is marked available for batch rows \[0\]"):
        model.encode_video(features, no_frames, available)
    with pytest.raises(ValueError, match=r"missing \['scene'\]"):
        model.encode_video(
            {k: v for k, v in features.items() if k != "scene"}, frame_masks, available
        )
    with pytest.raises(ValueError, match=r"features\['object'\] should be \(6, 5\)"):
        model.encode_video(dict(features, object=torch.zeros(6, 4)), frame_masks, available)
    with pytest.raises(ValueError, match=r"frame_masks\['audio@mr'\] is missing"):
        model.encode_video(features, {}, available)
    with pytest.raises(ValueError, match=r"available as bool \(B, 3\)"):
        model.encode_video(features, frame_masks, available.float())
    with pytest.raises(ValueError, match=r"token ids must lie in \[0, 20\)"):
        model.encode_text(torch.full((2, 3), 20), torch.ones(2, 3, dtype=torch.bool))
    with pytest.raises(ValueError, match="vocab_size must be an integer >= 2"):
        CollaborativeExperts(CONFIG, EXPERTS, None)
    with pytest.raises(ValueError, match="dim must be a positive integer"):
        CollaborativeExperts(CONFIG, {"scene": ExpertInfo(0)}, VOCAB)


def test_precomputed_token_features():
    config = ModelConfig(
        shared_dim=8, text_vlad_clusters=3, video_vlad_clusters=2, text_input_dim=12
    )
    model = _model(config, vocab=None).train()
    assert model.word_embedding is None
    _, mask, features, frame_masks, available = _batch()
    token_features = torch.randn(6, 5, 12)
    text, logits = model.encode_text(token_features, mask)
    assert text.shape == (6, 3, 8) and logits.shape == (6, 3)
    padded = torch.cat([token_features, torch.randn(6, 2, 12)], dim=1)
    padded_mask = torch.cat([mask, torch.zeros(6, 2, dtype=torch.bool)], dim=1)
    assert torch.allclose(model.encode_text(padded, padded_mask)[0], text, atol=1e-6)
    sims = model(token_features, mask, features, frame_masks, available)
    assert sims.shape == (6, 6)
    sims.sum().backward()
    assert model.text_pooling.assign_weight.grad is not None
    with pytest.raises(ValueError, match=r"expected float token features \(B, L, 12\)"):
        model.encode_text(torch.zeros(6, 5, dtype=torch.long), mask)


def test_value_checks_can_be_turned_off_for_validated_data():
    config = ModelConfig(shared_dim=4, word_dim=3, text_vlad_clusters=2, video_vlad_clusters=2)
    model = CollaborativeExperts(config, {"object": ExpertInfo(5)}, 6).eval()
    tokens, mask = torch.tensor([[9]]), torch.tensor([[True]])
    with pytest.raises(ValueError, match="token ids must lie in"):
        model.encode_text(tokens, mask)
    model.check_values = False  # ids out of range are then torch's own IndexError
    with pytest.raises(IndexError):
        model.encode_text(tokens, mask)
