"""Model selection: the score of a validation result, its tie-break, and "is it better".

The trainer keeps the checkpoint of the best validation; experiments report with the same
score. ``selection`` names are ``rudder.config.SELECTIONS``.
"""

from __future__ import annotations

import numpy as np

from rudder.errors import ConfigError
from rudder.metric_names import GMEAN_MDR_MNR, GMEAN_R5_R10_R50, LOWER_IS_BETTER


def _gmean(parts: list[float]) -> float:
    return float(np.exp(np.mean(np.log(parts)))) if min(parts) > 0 else 0.0


def selection_score(result: dict, selection: str) -> float:
    """The model-selection value of an evaluation, higher is better (rank criteria negated).

    The RUDDER paper's two criteria: ``<direction>.gmean_r5_r10_r50``, the geometric mean of
    R@5, R@10 and R@50 (maximised), and ``<direction>.gmean_mdr_mnr``, the geometric mean of
    MdR and MnR (minimised, so its score is the negated mean). Any other metric of the
    direction (``t2v.R1``, ``v2t.MdR``, ...) selects on that metric, MdR and MnR negated.
    """
    direction, name = selection.split(".", 1)
    values = result[direction]
    if name == GMEAN_R5_R10_R50:
        return _gmean([values["R5"], values["R10"], values["R50"]])
    if name == GMEAN_MDR_MNR:
        return -_gmean([values["MdR"], values["MnR"]])
    if name not in values:
        raise ConfigError(
            f"selection metric {name!r} unknown; use gmean_r5_r10_r50, gmean_mdr_mnr or one of "
            f"{sorted(values)}"
        )
    if values[name] is None:
        raise ConfigError(
            f"selection metric {selection} is n/a on this split (no query has a relevant item "
            "at the run's rho); select on another metric"
        )
    return reported_value(float(values[name]), selection)


def lower_is_better(selection: str) -> bool:
    """True for the rank criteria (MdR, MnR and their geometric mean)."""
    name = selection.split(".", 1)[1]
    return name == GMEAN_MDR_MNR or name in LOWER_IS_BETTER


def reported_value(score: float, selection: str) -> float:
    """The criterion's own value of a selection score and back (rank criteria are negated in
    scores, so the map is its own inverse): what logs and ``metrics.json`` show."""
    return -score if lower_is_better(selection) else score


def tie_break(selection: str) -> str:
    """The criterion that decides between evaluations of equal selection score: RUDDER's other
    criterion in the same direction (``gmean_r5_r10_r50`` <-> ``gmean_mdr_mnr``; any other
    selection falls back to ``gmean_r5_r10_r50``). Equal on both, the earlier epoch stays best."""
    direction, name = selection.split(".", 1)
    return f"{direction}.{GMEAN_MDR_MNR if name == GMEAN_R5_R10_R50 else GMEAN_R5_R10_R50}"


def selection_key(result: dict, selection: str) -> tuple[float, float]:
    """(score, tie-break score) of an evaluation, compared by :func:`improves`."""
    return selection_score(result, selection), selection_score(result, tie_break(selection))


def improves(key: tuple[float, float], best: tuple[float, float]) -> bool:
    """An evaluation becomes the best only with a strictly higher score or, on an equal score,
    a strictly higher tie-break score (:func:`tie_break`); equal on both keeps the earlier."""
    return key > best
