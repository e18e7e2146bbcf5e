"""Text side: tokenisation, vocabularies and caption similarity.

``rudder.text.tokenize`` is the function (it shadows the submodule of the same name; import
the module's other names with ``from rudder.text.tokenize import ...``).
The optional pretrained encoder lives in :mod:`rudder.text.pretrained` and is not imported
here (it needs sentence-transformers).
"""

from rudder.text.similarity import CaptionSimilarity
from rudder.text.tokenize import tokenize, tokenize_batch
from rudder.text.vocabulary import PAD, PAD_TOKEN, UNK, UNK_TOKEN, Vocabulary

__all__ = [
    "PAD",
    "PAD_TOKEN",
    "UNK",
    "UNK_TOKEN",
    "CaptionSimilarity",
    "Vocabulary",
    "tokenize",
    "tokenize_batch",
]
