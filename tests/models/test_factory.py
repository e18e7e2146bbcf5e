"""rudder.models.build: the one place a model is made from the config, through MODELS."""

import pytest
import torch

from rudder import models
from rudder.config import ConfigError, from_dict
from rudder.data.layout import ExpertInfo
from rudder.models import CollaborativeExperts, ModelConfig

EXPERTS = {"object": ExpertInfo(16), "audio@mr": ExpertInfo(8, True)}


def test_the_default_model_is_collaborative_experts():
    config = ModelConfig(shared_dim=8, word_dim=4, text_vlad_clusters=2, video_vlad_clusters=2)
    assert config.name == "ce" and list(models.MODELS) == ["ce"]
    torch.manual_seed(0)
    built = models.build(config, EXPERTS, 10)
    torch.manual_seed(0)
    direct = CollaborativeExperts(config, EXPERTS, 10)
    assert type(built) is CollaborativeExperts and built.experts == ["audio@mr", "object"]
    assert built.state_dict().keys() == direct.state_dict().keys()
    assert all(
        torch.equal(built.state_dict()[k], direct.state_dict()[k]) for k in direct.state_dict()
    )


def test_word_vectors_initialise_the_word_embeddings():
    config = ModelConfig(shared_dim=8, word_dim=4, text_vlad_clusters=2, video_vlad_clusters=2)
    vectors = torch.arange(40, dtype=torch.float32).view(10, 4)
    model = models.build(config, EXPERTS, 10, word_vectors=vectors)
    assert torch.equal(model.word_embedding.weight.detach(), vectors)


def test_an_unknown_name_lists_the_known_ones():
    with pytest.raises(
        ConfigError, match=r"model.name='clip' is not valid; expected one of \['ce'\]"
    ):
        models.build(ModelConfig(name="clip"), EXPERTS, 10)
    with pytest.raises(
        ConfigError, match=r"model.name='clip' is not valid; expected one of \['ce'\]"
    ):
        from_dict({"model": {"name": "clip"}})


class Incomplete(torch.nn.Module):
    def __init__(self, config, experts, vocab_size):
        super().__init__()
        self.experts = sorted(experts)

    def encode_text(self, tokens, mask):
        raise NotImplementedError


def test_a_registered_model_is_built_and_checked(monkeypatch):
    monkeypatch.setitem(models.MODELS, "incomplete", lambda: Incomplete)
    config = from_dict({"model": {"name": "incomplete"}})  # the config accepts a new registry entry
    with pytest.raises(TypeError, match=r"lacks \['encode_video', 'similarity', 'check_values'\]"):
        models.build(config.model, EXPERTS, 10)


class WithoutWordEmbeddings(Incomplete):
    check_values = True

    def encode_video(self, features, frame_masks, available):
        raise NotImplementedError

    @staticmethod
    def similarity(text, logits, video, available, check_values=True):
        raise NotImplementedError


def test_word_vectors_need_a_model_that_takes_them(monkeypatch):
    monkeypatch.setitem(models.MODELS, "plain", lambda: WithoutWordEmbeddings)
    config = from_dict({"model": {"name": "plain"}})
    assert isinstance(models.build(config.model, EXPERTS, 10), WithoutWordEmbeddings)
    with pytest.raises(ConfigError, match="model 'plain' takes no word vectors; unset "
                                          "data.word_vectors"):
        models.build(config.model, EXPERTS, 10, word_vectors=torch.zeros(10, 4))
