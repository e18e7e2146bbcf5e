"""Measurements behind docs/heuristics.md: the UD tagger table and the EPIC-KITCHENS-100 check."""
