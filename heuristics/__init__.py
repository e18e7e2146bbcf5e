"""heuristics: noun/verb columns, class maps and relations for rudder datasets.

Stanza taggers (trained offline or downloaded) and a lexicon tagger tag captions
(:mod:`heuristics.taggers`), :mod:`heuristics.nouns_verbs` extracts noun and verb lemmas,
:mod:`heuristics.classes` maps them to concept ids, :mod:`heuristics.label` writes the
columns :mod:`rudder.supervision` reads, and :mod:`heuristics.relations` adds caption-pair
relations. Command line: ``python -m heuristics --help``. This package imports ``rudder``;
``rudder`` never imports it.
"""
