"""Evaluation: metrics and their names, significance tests, model selection, fusion,
inference over a split, the evaluate command, query languages and results tables."""
