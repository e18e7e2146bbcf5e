"""Every committed suite config loads as a rudder TrainConfig; suite metadata is checked."""

import pytest
import yaml

from experiments.suites import (
    SUITES_DIR,
    SuiteError,
    config_changes,
    load_suite,
    row_config,
    row_data,
    run_key,
    suite_names,
)
from rudder.config import from_dict, load_yaml

ALL_ROW_FILES = sorted(p for p in SUITES_DIR.glob("*/*.yaml") if p.name != "suite.yaml")
EXPECTED = {
    "rudder-table1",
    "rudder-multilingual",
    "rudder-same-language",
    "rudder-cross-audio",
    "charades-sta",
    "msrvtt-1cap",
    "msrvtt-1ka",
    "didemo",
    "relevance",
    "epic-relevance",
}


def test_the_issue_suites_exist():
    assert set(suite_names()) == EXPECTED


@pytest.mark.parametrize("path", ALL_ROW_FILES, ids=lambda p: f"{p.parent.name}/{p.name}")
def test_row_config_loads_with_from_dict(path):
    config = from_dict(load_yaml(path))
    assert config.name and config.loss.name


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_suite_loads_and_lists_every_row_file(name):
    suite = load_suite(name)
    listed = {row.path.name for row in suite.rows}
    assert listed == {p.name for p in ALL_ROW_FILES if p.parent.name == name}


def test_the_table_rows_are_the_issue_ones():
    table1 = load_suite("rudder-table1")
    assert table1.labels == ("Triplet", "DW", "MM", "OT", "PO", "PO(M)", "PO(M) labels only",
                             "PO(M) sampler only")
    losses = {r.label: (r.data["loss"]["name"], r.data.get("supervision", {})) for r in table1.rows}
    assert losses["PO"] == ("po", {"rho": 0.25}) and losses["PO(M)"] == (
        "po", {"manual_relations": True, "relation_batches": True, "description_labels": True,
               "rho": 0.25})  # rho: the suite's evaluation protocol
    # PO(M)'s two parts on their own: its labels without the sampler, the sampler (which needs
    # the relations) without the description labels
    assert losses["PO(M) labels only"][1] == {"manual_relations": True,
                                              "description_labels": True, "rho": 0.25}
    assert losses["PO(M) sampler only"][1] == {"manual_relations": True,
                                               "relation_batches": True, "rho": 0.25}
    assert {("PO(M) labels only", "PO"), ("PO(M) sampler only", "PO")} <= set(table1.comparisons)
    relevance = load_suite("relevance")
    taus = sorted(
        r.data["loss"]["params"]["tau"] for r in relevance.rows if r.data["loss"]["name"] == "ranp"
    )
    assert taus == [0.15, 0.40, 0.75]
    assert {r.data["supervision"].get("batch_relevance") for r in relevance.rows
            if r.data["loss"]["name"] in ("ran", "ranp")} == {"video"}  # R(v, q), as RANP
    assert {r.data["loss"]["name"] for r in relevance.rows} >= {
        "ran",
        "ranp",
        "relevance_margin",
        "mimm_adaptive",
        "sms",
        "hn_exclusion",
        "mm",
    }
    assert relevance.fusion.methods == ("avg", "max", "hybrid")
    assert ("PO", "MM") in relevance.comparisons and ("best", "MM") in relevance.comparisons
    # the relevance-free control of the rows that mine the hardest negative
    assert "hn" in {r.data["loss"]["name"] for r in relevance.rows}
    assert {("Relevance margin", "HN"), ("RAN", "HN")} <= set(relevance.comparisons)
    epic = load_suite("epic-relevance")
    assert {r.data["loss"]["name"] for r in epic.rows} == {
        "mm", "hn", "ran", "ranp", "relevance_margin", "mimm_adaptive", "sms"}
    assert epic.requires_dataset and epic.test_metrics == ("rank", "nDCG", "mAP")


def test_the_paper_tables_have_their_losses():
    losses = {
        name: {r.data["loss"]["name"] for r in load_suite(name).rows}
        for name in ("rudder-multilingual", "msrvtt-1cap", "didemo", "charades-sta")
    }
    assert losses["rudder-multilingual"] == {"mm", "po", "ot"}
    assert losses["msrvtt-1cap"] == {"triplet", "mm", "po", "ot"}
    assert losses["didemo"] == {"triplet", "mm", "po", "ot", "hn"}
    assert losses["charades-sta"] == {"triplet", "mm", "po", "ot", "dw"}


def test_msrvtt_suites_select_on_the_split_they_name():
    full, one_k = load_suite("msrvtt-1cap"), load_suite("msrvtt-1ka")
    assert {row_config(r).data.val_split for r in full.rows} == {"validation"}
    assert {row_config(r).data.val_split for r in one_k.rows} == {"test"}
    assert "--split full --captions-per-video 1" in full.requires_dataset
    assert "--split 1k-A --captions-per-video 1" in one_k.requires_dataset
    assert "TEST split" in one_k.title and one_k.tune is None and full.tune is not None


def test_shared_rows_share_their_runs():
    mm = [
        row_data(r)
        for s in ("rudder-table1", "relevance", "rudder-multilingual")
        for r in load_suite(s).rows
        if r.label in ("MM", "MM, audio mr")
    ]
    assert len(mm) == 3 and len({run_key(d, "fp") for d in mm}) == 1
    table1 = load_suite("rudder-table1")
    mm_data, po_data = row_data(table1.rows[2]), row_data(table1.rows[4])
    assert run_key(mm_data, "fp") != run_key(po_data, "fp")
    assert run_key({**mm_data, "seed": 5}, "fp") == run_key(mm_data, "fp")
    assert run_key(row_data(table1.rows[2], epochs=3), "fp") != run_key(mm_data, "fp")
    assert run_key(mm_data, "other data") != run_key(mm_data, "fp")
    assert run_key(mm_data, "fp").startswith("mr-amr-mm-")


def test_config_changes_ignore_new_fields_but_not_changed_values():
    config = row_config(load_suite("rudder-table1").rows[1])  # dw
    saved = yaml.safe_load(yaml.safe_dump({**_to_dict(config)}))
    del saved["data"]["batch_size"]  # a field the run's rudder did not have yet
    saved["loss"]["params"]["dim"] = 256  # filled in by the trainer
    assert config_changes(saved, config) == []
    saved["optim"]["lr"] = 0.5
    assert config_changes(saved, config) == ["optim.lr: 0.5 in the run, 0.001 now"]


def _to_dict(config):
    from rudder.config import to_dict

    return to_dict(config)


def test_overrides_reach_the_config():
    row = load_suite("charades-sta").rows[0]
    config = row_config(row, dataset="/data/charades", epochs=4, seed=2)
    assert (config.data.dataset, config.epochs, config.seed) == ("/data/charades", 4, 2)


def _suite(tmp_path, meta, rows=(("a.yaml", {"loss": {"name": "mm"}}),)):
    folder = tmp_path / "s"
    folder.mkdir()
    for name, data in rows:
        (folder / name).write_text(yaml.safe_dump(data))
    (folder / "suite.yaml").write_text(yaml.safe_dump(meta))
    return tmp_path


@pytest.mark.parametrize(
    "meta, message",
    [
        (
            {
                "title": "t",
                "rows": [{"config": "a.yaml", "label": "A"}],
                "comparisons": [{"a": "A", "b": "Z"}],
            },
            "unknown row(s) ['Z']",
        ),
        (
            {"title": "t", "rows": [{"config": "a.yaml", "label": "A"}], "colour": 1},
            "unknown key(s) ['colour']",
        ),
        ({"title": "t", "rows": [{"config": "a.yaml"}]}, "rows[0]"),
        (
            {"title": "t", "rows": [{"config": "missing.yaml", "label": "A"}]},
            "missing.yaml does not exist",
        ),
        (
            {
                "title": "t",
                "rows": [{"config": "a.yaml", "label": "A"}],
                "comparisons": [{"a": "best", "b": "A"}],
            },
            "['best']",
        ),
        (
            {
                "title": "t",
                "rows": [{"config": "a.yaml", "label": "A"}, {"config": "a.yaml", "label": "B"}],
                "fusion": {"members": ["A", "B"], "hybrid_q": 3},
            },
            "hybrid_q must be an integer in [1, 2]",
        ),
        (
            {"title": "t", "rows": [{"config": "a.yaml", "label": "A"}],
             "evaluation": {"rho": 0}},
            "evaluation.rho must be a number in (0, 1]",
        ),
        (
            {"title": "t", "rows": [{"config": "a.yaml", "label": "A"}],
             "evaluation": {"relevance": "own"}},
            "evaluation.relevance must be one of ['reference', 'own_video']",
        ),
    ],
)
def test_bad_suites_are_clear_errors(tmp_path, meta, message):
    with pytest.raises(SuiteError) as error:
        load_suite("s", _suite(tmp_path, meta))
    assert message in str(error.value)


def test_a_bad_row_config_names_its_file(tmp_path):
    root = _suite(
        tmp_path,
        {"title": "t", "rows": [{"config": "a.yaml", "label": "A"}]},
        rows=[("a.yaml", {"loss": {"name": "mm"}, "data": {"caption_langs": ["fr"]}})],
    )
    with pytest.raises(SuiteError, match=r"a\.yaml.*'fr'"):
        row_config(load_suite("s", root).rows[0])


def test_protocol_rho_reaches_every_row_and_rows_may_not_differ(tmp_path):
    meta = {"title": "t", "rows": [{"config": "a.yaml", "label": "A"}],
            "evaluation": {"rho": 0.5}}
    suite = load_suite("s", _suite(_dir(tmp_path / "one"), meta))
    assert suite.protocol.rho == 0.5 and row_config(suite.rows[0]).supervision.rho == 0.5
    bad = (("a.yaml", {"loss": {"name": "mm"}, "supervision": {"rho": 0.25}}),)
    with pytest.raises(SuiteError, match="protocol fixes rho 0.5"):
        load_suite("s", _suite(_dir(tmp_path / "two"), meta, rows=bad))
    # the committed suites: one protocol each, rho 0.25 in every row
    for name in ("rudder-table1", "relevance", "rudder-multilingual"):
        suite = load_suite(name)
        assert suite.protocol.rho == 0.25
        assert {row_config(r).supervision.rho for r in suite.rows} == {0.25}


def test_fusion_members_of_different_losses_need_mixed_losses(tmp_path):
    rows = (("a.yaml", {"loss": {"name": "mm"}}), ("b.yaml", {"loss": {"name": "po"}}))
    meta = {"title": "t", "rows": [{"config": "a.yaml", "label": "A"},
                                   {"config": "b.yaml", "label": "B"}],
            "fusion": {"members": ["A", "B"], "hybrid_q": 1}}
    with pytest.raises(SuiteError, match="different losses"):
        load_suite("s", _suite(_dir(tmp_path / "one"), meta, rows=rows))
    meta["fusion"]["mixed_losses"] = True
    suite = load_suite("s", _suite(_dir(tmp_path / "two"), meta, rows=rows))
    assert suite.fusion.label("hybrid") == "Fusion HYBRID (mixed losses, Q'=1)"
    relevance = load_suite("relevance")
    ranp = relevance.fusions[0]
    assert ranp.pool_seeds and not ranp.mixed_losses and ranp.label("max") == "Fusion MAX (RANP)"


def _dir(path):
    path.mkdir()
    return path


def test_seeds_per_row_default_and_errors(tmp_path):
    from experiments.suites import DEFAULT_SEEDS

    from .conftest import write_suite

    write_suite(tmp_path, "plain", [("mm", "MM", "mm", {})])
    assert load_suite("plain", tmp_path).seeds == DEFAULT_SEEDS == 5
    write_suite(tmp_path, "ten", [("mm", "MM", "mm", {})], seeds=10)
    assert load_suite("ten", tmp_path).seeds == 10
    for bad in (1, "3", True):
        name = f"bad{bad}"
        write_suite(tmp_path, name, [("mm", "MM", "mm", {})], seeds=bad)
        with pytest.raises(SuiteError, match="seeds must be an integer of at least 2"):
            load_suite(name, tmp_path)
    for name in ("rudder-table1", "rudder-multilingual", "relevance", "epic-relevance"):
        assert load_suite(name).seeds == 10
