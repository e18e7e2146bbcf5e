"""The annotation tab's handlers across candidate-language modes ("same", "any")."""

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
    assert shown[1] == "v000-mr" and shown[3] in set(same)
    # the other way round: every Hindi candidate of v000-hi labelled, its "any" list is not
    label_all(tab, "v000-hi", SAME)
    label_all(tab, "v000-mr", SAME)
    assert tab.next_unlabelled("asha", "app-test", SAME)[1] == "v000-ta"  # both done
    assert tab.next_unlabelled("asha", "app-test", ANY)[1] == "v000-hi"
    label_all(tab, "v000-hi", ANY)
    assert tab.next_unlabelled("asha", "app-test", ANY)[1] == "v000-ta"


def test_next_unlabelled_ranks_only_the_query_it_shows(tab, monkeypatch):
    for query_id in tab.collections["app-test"].captions["caption_id"][:40]:
        label_all(tab, query_id, SAME)
    tab._ranked.cache_clear()  # a restarted server
    tab._candidate_ids.clear()
    calls = []
    rank = CandidateRanker.rank
    monkeypatch.setattr(CandidateRanker, "rank", lambda self, *a: calls.append(a) or rank(self, *a))
    shown = tab.next_unlabelled("asha", "app-test", SAME)
    assert shown[1] == "v008-mr" and [call[0] for call in calls] == ["v008-mr"]


def test_undo_shows_the_undone_pair_whatever_the_mode(tab):
    tab.label("partial", "asha", "app-test", "v000-mr", "v015-hi", ANY)
    undone = tab.undo("asha", "app-test", SAME)
    assert "Undid partial for v000\\-mr / v015\\-hi" in undone[4]
    assert (undone[1], undone[3]) == ("v000-mr", "v015-hi")


def test_exports_reuse_one_folder_and_report_what_they_wrote(tab):
    tab.store.add("app-test", "asha", "v000-mr", "v001-mr", "partial")
    first = tab.export("app-test")
    tab.store.add("app-test", "ravi", "v000-mr", "v001-mr", "partial")
    jsonl, _, kappa, status = tab.export("(all datasets)")
    assert Path(first[0]).parent == Path(jsonl).parent  # no new temporary folder per click
    assert Path(jsonl).read_text(encoding="utf-8").count("\n") == 2
    assert status == "Exported 2 labels." and len(kappa) == 1


def test_one_annotator_whatever_the_spelling_of_the_name(tab):
    from types import SimpleNamespace

    from app.annotate_handlers import normalise_name

    assert normalise_name("  Asha   RAO ") == "asha rao" and normalise_name(None) == ""
    assert tab.remember("  Ravi ") == ("ravi", "ravi")
    shown = tab.next_unlabelled("Asha ", "app-test", SAME)
    tab.label("positive", " ASHA", "app-test", shown[1], shown[3], SAME)
    login = SimpleNamespace(username="Asha", session_hash="tab-1")
    shown = tab.next_unlabelled("someone else", "app-test", SAME, login)
    tab.label("negative", "someone else", "app-test", shown[1], shown[3], SAME, login)
    assert tab.store.annotators("app-test") == ["asha"]
    assert "asha has labelled 2 pairs" in tab.next_unlabelled("asha", "app-test", SAME)[4]
