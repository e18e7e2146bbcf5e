"""Agreement between annotators, and the labels their judgments settle on.

Krippendorff's alpha (:func:`krippendorff_alpha`) follows K. Krippendorff, "Computing
Krippendorff's Alpha-Reliability" (2011, Annenberg School for Communication, University of
Pennsylvania, departmental paper 43), section C, the general form for any number of coders,
missing values and any metric:

* reliability data: one row per coder, one column per unit (here: a caption pair), NaN where
  a coder gave no value;
* only *pairable* values count: those of units with at least two values (``m_u >= 2``);
* the coincidence matrix ``o_ck = sum_u P_u(c, k) / (m_u - 1)``, where ``P_u(c, k)`` is the
  number of ordered pairs of values ``(c, k)`` of two different coders in unit ``u``
  (``n_uc * n_uk``, and ``n_uc * (n_uc - 1)`` on the diagonal); ``n_c = sum_k o_ck``,
  ``n = sum_c n_c``;
* ``alpha = 1 - (n - 1) * sum_ck o_ck delta2_ck / sum_ck n_c n_k delta2_ck`` (its
  ``1 - D_o / D_e``), with the difference functions of section C: nominal
  ``delta2 = [c != k]``; ordinal ``delta2_ck = (sum_{g=c..k} n_g - (n_c + n_k) / 2)^2``
  over the ranked values; interval ``(c - k)^2``.

Alpha is undefined (None) when no unit has two values or when every pairable value is the
same (``D_e = 0``). Cohen's kappa stays with the app's pairwise table
(``sklearn.metrics.cohen_kappa_score``).

:func:`settle` turns several annotators' labels of one pair into the label training uses.
"""

from __future__ import annotations

import math
from collections.abc import Iterable

import numpy as np
import pandas as pd

METRICS = ("nominal", "ordinal", "interval")
PAIR_KEY = ("dataset", "caption_id_a", "caption_id_b")


def _differences(values: np.ndarray, totals: np.ndarray, metric: str) -> np.ndarray:
    """``delta2[c, k]`` of the sorted distinct ``values`` with pairable totals ``n_c``."""
    if metric == "nominal":
        return 1.0 - np.eye(len(values))
    if metric == "interval":
        return np.subtract.outer(values, values) ** 2
    if metric == "ordinal":
        cumulative = np.concatenate([[0.0], np.cumsum(totals)])  # sum of n_g for g < c
        low = np.minimum.outer(np.arange(len(values)), np.arange(len(values)))
        high = np.maximum.outer(np.arange(len(values)), np.arange(len(values)))
        between = cumulative[high + 1] - cumulative[low]  # sum_{g=c..k} n_g
        return (between - np.add.outer(totals, totals) / 2.0) ** 2
    raise ValueError(f"unknown metric {metric!r}; use one of {METRICS}")


def coincidences(data) -> tuple[np.ndarray, np.ndarray]:
    """The sorted distinct values of ``data`` (coders x units, NaN missing) and their
    coincidence matrix ``o`` (module docstring); units with fewer than two values add
    nothing."""
    data = np.asarray(data, dtype=np.float64)
    if data.ndim != 2:
        raise ValueError(f"reliability data must be coders x units, got shape {data.shape}")
    present = ~np.isnan(data)
    values, codes = np.unique(data[present], return_inverse=True)
    units = np.nonzero(present)[1]
    counts = np.zeros((data.shape[1], len(values)))
    np.add.at(counts, (units, codes), 1.0)
    per_unit = counts.sum(1)
    pairable = per_unit >= 2
    counts, weight = counts[pairable], 1.0 / (per_unit[pairable] - 1.0)
    observed = (counts * weight[:, None]).T @ counts - np.diag(weight @ counts)
    return values, observed


def krippendorff_alpha(data, metric: str = "nominal") -> float | None:
    """Krippendorff's alpha of ``data`` (coders x units, NaN for a missing value) with the
    ``metric``'s difference function (module docstring); None where undefined."""
    values, observed = coincidences(data)
    totals = observed.sum(1)
    n = totals.sum()
    if n < 2 or len(values) == 0:
        return None
    delta = _differences(values, totals, metric)
    expected = (np.outer(totals, totals) * delta).sum()
    if expected <= 0:
        return None
    return float(1.0 - (n - 1.0) * (observed * delta).sum() / expected)


def reliability_data(records: Iterable[dict], value=lambda r: r["label"]):
    """``(coders, units, data)`` from label records (``annotator`` and the pair key
    ``dataset, caption_id_a, caption_id_b``): ``data`` is coders x units with ``value(r)``
    (NaN when it returns None) and NaN where a coder did not label a unit."""
    table = pd.DataFrame(
        [(r["annotator"], tuple(r[k] for k in PAIR_KEY), value(r)) for r in records],
        columns=["annotator", "unit", "value"],
    )
    if table.empty:
        return [], [], np.zeros((0, 0))
    wide = table.pivot_table(index="annotator", columns="unit", values="value", aggfunc="last",
                             dropna=False)
    return list(wide.index), list(wide.columns), wide.to_numpy(dtype=np.float64)


def settle(records: Iterable[dict], adjudicators: Iterable[str] = ()) -> tuple[list, list]:
    """One label per pair from every annotator's current label of it: ``(settled,
    unsettled)``, both sorted by pair.

    A pair an adjudicator labelled takes the adjudicators' label (``how: adjudicated``;
    adjudicators who disagree leave it unsettled). Otherwise: one label (``single``), every
    annotator the same (``agreed``), or the label more annotators gave than any other
    (``majority``); a tie for the most votes leaves the pair unsettled. Each settled record
    has the pair key, ``label``, ``how``, ``annotators`` (how many labelled it) and ``time``
    (the newest time among the labels counted); each unsettled one the pair key, ``labels``
    (annotator -> label) and ``why``. Grouped with pandas, no loop over pairs.
    """
    table = pd.DataFrame(list(records), columns=[*PAIR_KEY, "annotator", "label", "time"])
    if table.empty:
        return [], []
    key = list(PAIR_KEY)
    table["label"] = table["label"].astype(int)
    table["time"] = table["time"].astype(str)
    table["adjudicator"] = table["annotator"].isin(set(adjudicators))
    pairs = table.groupby(key, sort=True).agg(
        annotators=("annotator", "size"), judged=("adjudicator", "any"),
        distinct=("label", "nunique"))
    judged = pairs["judged"].reindex(pd.MultiIndex.from_frame(table[key])).to_numpy()
    voters = table[table["adjudicator"].to_numpy() == judged]
    votes = voters.groupby([*key, "label"], sort=True).agg(
        votes=("annotator", "size"), time=("time", "max")).reset_index()
    votes = votes.sort_values([*key, "votes"], ascending=[True] * len(key) + [False],
                              kind="stable")
    best = votes.groupby(key, sort=True).head(2)
    first = best.groupby(key, sort=True).head(1).set_index(key)
    second = best.groupby(key, sort=True).nth(1).set_index(key)["votes"]
    tie = second.reindex(first.index).fillna(0).to_numpy() == first["votes"].to_numpy()
    how = np.select(
        [pairs["judged"].to_numpy(), pairs["annotators"].to_numpy() == 1,
         pairs["distinct"].to_numpy() == 1],
        ["adjudicated", "single", "agreed"], "majority")
    settled = first.assign(how=how, annotators=pairs["annotators"].to_numpy())[~tie]
    out = [{**dict(zip(key, index, strict=True)), "label": int(row.label), "how": row.how,
            "annotators": int(row.annotators), "time": row.time}
           for index, row in zip(settled.index, settled.itertuples(), strict=True)]
    unsettled = []
    if tie.any():
        open_pairs = first.index[tie]
        rows = table.set_index(key).loc[open_pairs].reset_index()
        for index, group in rows.groupby(key, sort=True):
            unsettled.append({
                **dict(zip(key, index, strict=True)),
                "labels": dict(zip(group["annotator"], group["label"].astype(int), strict=True)),
                "why": "adjudicators disagree" if group["adjudicator"].any() else "votes tie",
            })
    return out, unsettled


def round_or_none(value, digits: int = 3):
    """``value`` rounded, None for None or NaN (for reports)."""
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return None
    return round(float(value), digits)
