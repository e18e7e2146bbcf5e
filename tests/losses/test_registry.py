"""The registry: names, parameters and defaults exactly as the loss table of
docs/architecture.md; build errors."""

import pytest
import torch

from rudder import losses

# docs/architecture.md, "Public API": the losses table.
TABLE = {
    "mm": {"margin": 0.2},
    "triplet": {"margin": 0.2},
    "hn": {"margin": 0.2},
    "dw": {"margin": 0.2, "dim": None, "cutoff": 0.5, "nonzero_loss_cutoff": 1.4},
    "ot": {"lam": 5.0, "margin": 1.0, "iterations": 20, "positive_labels": False},
    "po": {"p": 0.02, "m1": 0.05, "m2": 0.15, "n": 0.2, "description_as_partial": True,
           "reduction": "mean"},
    "ran": {"margin": 0.2, "tau": 0.15},
    "ranp": {"margin": 0.2, "margin_pos": 0.2, "tau": 0.15},
    "relevance_margin": {"max_violation": False},
    "mimm_adaptive": {"margin": 0.4, "own_relevance": "given"},
    "sms": {"margin": 0.6, "slack": 0.1, "band": "reference", "own_relevance": "given"},
    "hn_exclusion": {"margin": 0.2, "exclude_top": 0.01, "scope": "dataset", "threshold": None,
                     "threshold_pairs": "all"},
}
NEEDS = {
    "triplet": ("generator",),
    "dw": ("generator",),
    "po": ("labels",),
    "ran": ("relevance",),
    "ranp": ("relevance",),
    "relevance_margin": ("relevance",),
    "mimm_adaptive": ("relevance",),
    "sms": ("relevance",),
    "hn_exclusion": ("text_sims",),
}


def test_names_are_the_table():
    assert losses.names() == tuple(TABLE)


@pytest.mark.parametrize("name", list(TABLE))
def test_defaults_are_the_table(name):
    assert losses.defaults(name) == TABLE[name]


@pytest.mark.parametrize("name", list(TABLE))
def test_build_returns_a_module_with_the_defaults(name):
    params = {"dim": 64} if name == "dw" else {}
    loss = losses.build(name, **params)
    assert isinstance(loss, torch.nn.Module)
    expected = {**TABLE[name], **params}
    assert loss.hparams() == expected
    assert loss.requires == NEEDS.get(name, ())
    assert loss.optional == ()


def test_build_passes_parameters():
    assert losses.build("ranp", margin=0.1, margin_pos=0.3, tau=0.5).hparams() == {
        "margin": 0.1, "margin_pos": 0.3, "tau": 0.5,
    }
    assert "margin=0.1" in repr(losses.build("mm", margin=0.1))


def test_unknown_name_lists_the_valid_ones():
    with pytest.raises(losses.LossConfigError, match="unknown loss 'maxmargin'") as info:
        losses.build("maxmargin")
    for name in TABLE:
        assert name in str(info.value)


def test_unknown_parameter_lists_the_valid_ones():
    with pytest.raises(losses.LossConfigError, match="unknown parameter.*marginn") as info:
        losses.build("hn", marginn=0.3)
    assert "margin=0.2" in str(info.value)
    with pytest.raises(losses.LossConfigError, match="tau=0.15"):
        losses.build("ranp", margin_neg=0.1)


def test_dw_requires_dim():
    with pytest.raises(losses.LossConfigError, match="requires parameter 'dim'"):
        losses.build("dw")
    with pytest.raises(losses.LossConfigError, match="'dim' must be an integer >= 2"):
        losses.build("dw", dim=1)
    with pytest.raises(losses.LossConfigError, match="'dim' must be an integer"):
        losses.build("dw", dim=64.0)


@pytest.mark.parametrize(
    "name, params, message",
    [
        ("mm", {"margin": "0.2"}, "'margin' must be a number"),
        ("mm", {"margin": True}, "'margin' must be a number"),
        ("mm", {"margin": -0.1}, r"'margin' must be a finite number in \[0, inf\]"),
        ("ot", {"lam": 0}, r"'lam' must be a finite number in \(0, inf\]"),
        ("ot", {"iterations": 0}, "'iterations' must be an integer >= 1"),
        ("ran", {"tau": 1.5}, r"'tau' must be a finite number in \[0, 1\]"),
        ("hn_exclusion", {"exclude_top": 1.0}, r"in \[0, 1\)"),
        ("relevance_margin", {"max_violation": 1}, "must be true or false"),
        ("po", {"n": float("nan")}, "'n' must be a finite number"),
        ("dw", {"dim": 8, "cutoff": 0}, r"'cutoff' must be a finite number in \(0, inf\]"),
    ],
)
def test_bad_parameter_values(name, params, message):
    with pytest.raises(losses.LossConfigError, match=message):
        losses.build(name, **params)
