"""Search for the app: the embedding index, its on-disk cache, top-k with ties, faiss."""
