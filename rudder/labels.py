"""Pair labels: how a candidate caption relates to a query caption (docs/architecture.md,
"Pair labels").

A *pair label* is the 0-3 relation of two captions that the RUDDER partial-order loss reads
(Akula et al., "Cross Lingual Video and Text Retrieval: A New Benchmark Dataset and
Algorithm", ICMI 2021, arXiv:2103.05457, Sec. 3.1 and Eq. 1): the noun/verb heuristic gives
negative, partial or positive, and the paper's manual annotations (PO(M)) add description.
The integer values are stored in relations files, annotation databases and label tensors,
so they never change. Not to be confused with the noun/verb columns a dataset is tagged
with (:data:`rudder.data.layout.NOUN_VERB_COLUMNS`).
"""

from __future__ import annotations

from enum import IntEnum


class PairLabel(IntEnum):
    """The relation of a candidate caption to a query caption; an ``int`` in tensors and files.

    - ``NEGATIVE`` (0): unrelated; the loss pushes the pair at least ``n`` farther apart
      than the anchor's own pair.
    - ``PARTIAL`` (1): shares part of the query's nouns or verbs (the noun/verb overlap
      reaches ``alpha_n`` or ``alpha_v``); kept between ``m1`` and ``m2`` farther.
    - ``POSITIVE`` (2): the candidate has every noun and verb class the query has (or an
      annotator says it describes the same thing); as close as the anchor's own pair.
    - ``DESCRIPTION`` (3): RUDDER's manual relation, a continuation or an application of the
      other caption; treated as partial by the loss unless configured otherwise.
    """

    NEGATIVE = 0
    PARTIAL = 1
    POSITIVE = 2
    DESCRIPTION = 3

    @property
    def text(self) -> str:
        """The lower-case name files and the app use (``"negative"``, ...)."""
        return self.name.lower()


# The labels the noun/verb heuristic produces (description comes only from annotations or
# the caption-kind rule), in value order.
HEURISTIC_LABELS = (PairLabel.NEGATIVE, PairLabel.PARTIAL, PairLabel.POSITIVE)
# The value of an unlabelled pair in lookups and label matrices (never stored).
NO_LABEL = -1
# name -> value of every pair label, the spelling relations files and the app accept.
PAIR_LABELS = {label.text: int(label) for label in PairLabel}
