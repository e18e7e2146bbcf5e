"""RetrievalLoss.run_params: the parameters a training run supplies (RunFacts), per loss."""

import pytest

from rudder import losses


class Facts:
    """A RunFacts that records what it was asked."""

    embedding_dim = 96

    def __init__(self):
        self.asked = []

    def caption_similarity_threshold(self, top_fraction, other_videos=False):
        self.asked.append(top_fraction if not other_videos else (top_fraction, "other videos"))
        return 0.75


def test_dw_takes_the_embedding_dimension_unless_given():
    assert losses.run_params("dw", {}, Facts()) == {"dim": 96}
    assert losses.run_params("dw", {"dim": 8}, Facts()) == {}
    assert losses.build("dw", **losses.run_params("dw", {}, Facts())).dim == 96


def test_hn_exclusion_takes_the_dataset_threshold_in_its_dataset_scope():
    facts = Facts()
    assert losses.run_params("hn_exclusion", {"exclude_top": 0.05}, facts) == {"threshold": 0.75}
    assert facts.asked == [0.05]
    assert losses.run_params("hn_exclusion", {}, facts) == {"threshold": 0.75}
    assert facts.asked == [0.05, 0.01]  # the default exclude_top
    assert losses.run_params("hn_exclusion", {"threshold": 0.5}, facts) == {}
    assert losses.run_params("hn_exclusion", {"scope": "batch"}, facts) == {}
    assert facts.asked == [0.05, 0.01]  # nothing computed when not needed
    assert losses.run_params("hn_exclusion", {"threshold_pairs": "other_videos"}, facts) == {
        "threshold": 0.75}
    assert facts.asked[-1] == (0.01, "other videos")  # the paper's in-batch pairs
    with pytest.raises(losses.LossConfigError, match="threshold_pairs"):
        losses.run_params("hn_exclusion", {"threshold_pairs": "batches"}, facts)
    with pytest.raises(losses.LossConfigError, match="exclude_top"):
        losses.run_params("hn_exclusion", {"exclude_top": 1.5}, facts)


def test_hn_exclusion_on_too_few_pairs_to_exclude_one_is_a_clear_error():
    class TinyTrainingSet(Facts):
        def caption_similarity_threshold(self, top_fraction, other_videos=False):
            return float("inf")  # top_fraction_threshold: floor(fraction x pairs) == 0

    with pytest.raises(losses.LossConfigError, match="less than one pair.*scope='batch'"):
        losses.run_params("hn_exclusion", {}, TinyTrainingSet())


@pytest.mark.parametrize("name", [n for n in losses.names() if n not in ("dw", "hn_exclusion")])
def test_other_losses_take_nothing_from_the_run(name):
    facts = Facts()
    assert losses.run_params(name, {}, facts) == {} and facts.asked == []


def test_unknown_parameters_are_an_error_before_the_run_is_asked():
    facts = Facts()
    with pytest.raises(losses.LossConfigError, match="unknown parameter"):
        losses.run_params("hn_exclusion", {"top": 0.1}, facts)
    assert facts.asked == []


def test_a_config_is_checked_with_the_facts_known_before_the_data():
    from rudder.config import from_dict

    config = from_dict({"loss": {"name": "dw"}, "model": {"shared_dim": 32}})
    assert config.loss.params == {}  # checking fills nothing in; the run records dim
    config = from_dict({"loss": {"name": "hn_exclusion"}})
    assert config.loss.params == {}
