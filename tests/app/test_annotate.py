"""The annotation tab's handlers across candidate-language modes ("same", "any")."""

import json
from pathlib import Path

import pytest

from app.annotate_handlers import ANY, SAME, AnnotateTab
from app.annotations_db import AnnotationStore
from app.candidates import CandidateRanker
from app.collection import Collection


@pytest.fixture
def tab(app_dataset, tmp_path):
    collection = Collection(app_dataset)
    return AnnotateTab(AnnotationStore(tmp_path / "a.sqlite"), {collection.name: collection})


def label_all(tab, query_id, mode):
    for candidate in tab.candidates("app-test", query_id, mode)["caption_id"]:
        tab.store.add("app-test", "asha", query_id, candidate, "negative")


def test_next_unlabelled_counts_the_candidates_of_the_current_mode(tab):
    # every "any" candidate of v000-mr labelled: 16 of its 20 Marathi candidates are not
    label_all(tab, "v000-mr", ANY)
    same = tab.candidates("app-test", "v000-mr", SAME)["caption_id"]
    assert (~same.isin(tab.store.labelled_candidates("app-test", "asha", "v000-mr"))).sum() == 16
    shown = tab.next_unlabelled("asha", "app-test", SAME)
    assert shown.query_id == "v000-mr" and shown.candidate_id in set(same)
    # the other way round: every Hindi candidate of v000-hi labelled, its "any" list is not
    label_all(tab, "v000-hi", SAME)
    label_all(tab, "v000-mr", SAME)
    assert tab.next_unlabelled("asha", "app-test", SAME).query_id == "v000-ta"  # both done
    assert tab.next_unlabelled("asha", "app-test", ANY).query_id == "v000-hi"
    label_all(tab, "v000-hi", ANY)
    assert tab.next_unlabelled("asha", "app-test", ANY).query_id == "v000-ta"


def test_next_unlabelled_ranks_only_the_query_it_shows(tab, monkeypatch):
    for query_id in tab.collections["app-test"].captions["caption_id"][:40]:
        label_all(tab, query_id, SAME)
    tab._ranked.cache_clear()  # a restarted server
    tab._candidate_ids.clear()
    calls = []
    rank = CandidateRanker.rank
    monkeypatch.setattr(CandidateRanker, "rank", lambda self, *a: calls.append(a) or rank(self, *a))
    shown = tab.next_unlabelled("asha", "app-test", SAME)
    assert shown.query_id == "v008-mr" and [call[0] for call in calls] == ["v008-mr"]


def test_undo_shows_the_undone_pair_whatever_the_mode(tab):
    tab.label("partial", "asha", "app-test", "v000-mr", "v015-hi", ANY)
    undone = tab.undo("asha", "app-test", SAME)
    assert "Undid partial for v000\\-mr / v015\\-hi" in undone.progress
    assert (undone.query_id, undone.candidate_id) == ("v000-mr", "v015-hi")


def test_exports_reuse_one_folder_and_report_what_they_wrote(tab):
    tab.store.add("app-test", "asha", "v000-mr", "v001-mr", "partial")
    first = tab.export("app-test")
    tab.store.add("app-test", "ravi", "v000-mr", "v001-mr", "partial")
    jsonl, _, report, kappa, status = tab.export("(all datasets)")
    assert Path(first[0]).parent == Path(jsonl).parent == Path(report).parent  # one folder
    assert Path(jsonl).read_text(encoding="utf-8").count("\n") == 2
    assert status == "Exported 2 labels and their agreement report." and len(kappa) == 1
    assert json.loads(Path(report).read_text(encoding="utf-8"))["shared_pairs"] == 1


def test_the_agreement_view_lists_disagreements_to_open(tab):
    for name, label in (("asha", "partial"), ("ravi", "negative"), ("mina", "negative")):
        tab.store.add("app-test", name, "v000-mr", "v001-mr", label)
    tab.store.add("app-test", "asha", "v000-mr", "v002-mr", "positive")
    tab.store.add("app-test", "ravi", "v000-mr", "v002-mr", "positive")
    kappa, summary, per_annotator, disagreements, choices = tab.agreement("app-test")
    assert "3 annotators, 5 labels of 2 pairs; 2 pairs labelled by two or more" in summary
    assert "1 pairs with disagreeing labels" in summary and len(kappa) == 3
    assert per_annotator["annotator"].tolist() == ["asha", "mina", "ravi"]
    assert disagreements.values.tolist() == [
        ["app-test", "v000-mr", "v001-mr", "asha: partial, mina: negative, ravi: negative"]]
    value = choices["choices"][0][1]
    shown = tab.open_pair("boss", "app-test", value)
    assert (shown.query_id, shown.candidate_id) == ("v000-mr", "v001-mr")
    assert "asha partial, mina negative, ravi negative" in shown.candidate_html
    with pytest.raises(Exception, match="choose it in the Dataset field"):
        tab.open_pair("boss", "other-set", value)


def test_one_annotator_whatever_the_spelling_of_the_name(tab):
    from types import SimpleNamespace

    from app.annotate_handlers import normalise_name

    assert normalise_name("  Asha   RAO ") == "asha rao" and normalise_name(None) == ""
    assert tab.remember("  Ravi ") == ("ravi", "ravi")
    shown = tab.next_unlabelled("Asha ", "app-test", SAME)
    tab.label("positive", " ASHA", "app-test", shown.query_id, shown.candidate_id, SAME)
    login = SimpleNamespace(username="Asha", session_hash="tab-1")
    shown = tab.next_unlabelled("someone else", "app-test", SAME, request=login)
    pair = (shown.query_id, shown.candidate_id)
    tab.label("negative", "someone else", "app-test", *pair, SAME, request=login)
    assert tab.store.annotators("app-test") == ["asha"]
    assert "asha has labelled 2 pairs" in tab.next_unlabelled("asha", "app-test", SAME).progress


def test_every_annotator_handler_without_a_name_shows_only_the_message(tab):
    """The for_annotator check: no name (blank or spaces), no login -> nothing changes but
    the progress line; nothing is stored."""
    from app.annotate_handlers import NO_ANNOTATOR, View

    calls = {
        "next_unlabelled": lambda name: tab.next_unlabelled(name, "app-test", SAME),
        "label": lambda name: tab.label("positive", name, "app-test", "v000-mr", "v001-mr"),
        "skip": lambda name: tab.skip(name, "app-test", "v000-mr", "v001-mr", SAME,
                                      request=None),
        "undo": lambda name: tab.undo(name, "app-test", request=None),
    }
    for handler, call in calls.items():
        for name in ("", "   ", None):
            shown = call(name)
            assert isinstance(shown, View) and shown.progress == f"**{NO_ANNOTATOR}**", handler
            others = [v for k, v in vars(shown).items() if k != "progress"]
            assert all(v == {"__type__": "update"} for v in others), (handler, others)
    assert tab.store.annotators("app-test") == []
    with pytest.raises(Exception, match="annotator"):
        tab.skip("x" * 500, "app-test", "v000-mr", "v001-mr")  # a name the store refuses


def test_a_view_gives_its_values_in_the_order_of_the_tab_outputs(tab):
    from app.annotate_handlers import View

    shown = tab.open_query("asha", "app-test", "v000-mr", SAME)
    values = shown.as_outputs()
    assert len(values) == 7 and values[1] == "v000-mr" and values[3] == shown.candidate_id
    assert values[5] is shown.history  # the same objects, not copies
    assert [f for f in View.__dataclass_fields__] == [
        "query_html", "query_id", "candidate_html", "candidate_id", "progress", "history",
        "others",
    ]
