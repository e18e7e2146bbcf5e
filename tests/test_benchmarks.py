"""Every benchmark script still runs (at a small size): a refactor that breaks one shows here,
not months later when someone re-measures a README figure. Whether a speed target is met is
the script's own business (it exits 1 on a miss, which small sizes may do); outputs that
differ from the reference (exit code 3), a target left unchecked (4) or a traceback are not.
The scripts' own verdicts (exit codes) are checked below on small, rigged inputs."""

import importlib.util
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import pytest

ROOT = Path(__file__).resolve().parents[1]
# "{tmp}" stands for the test's temporary folder.
SMALL = {
    "bench_annotation.py": ["--seeds", "0", "--epochs", "1", "--sizes", "20", "--labels", "200",
                            "--rounds", "3", "--alpha-pairs", "2000", "--heuristic",
                            "generator"],  # the default reads Stanza taggers trained offline
    "bench_app_restart.py": ["--runs", "{tmp}/runs", "--restarts", "1"],  # trains a quick model
    "bench_app_search.py": ["--runs", "{tmp}/runs", "--rounds", "1", "--per-round", "2",
                            "--clients", "2", "--per-client", "1", "--queries", "3"],
    "bench_build.py": ["--videos", "200"],
    "bench_default_run.py": [],  # the README's main job, full size (about a minute)
    "bench_extract.py": ["--videos", "2", "--seconds", "2", "--rounds", "1", "--long-seconds",
                         "4", "--memory-videos", "12"],
    "bench_feature_loading.py": ["--videos", "50", "--repeat", "1"],
    "bench_index.py": ["--videos", "3000", "--queries", "2", "--batch", "4", "--rounds", "1"],
    "bench_login_flood.py": ["--runs", "{tmp}/runs", "--searches", "2", "--rounds", "1"],
    "bench_losses.py": ["--batch", "16", "--repeats", "1", "--threads", "1"],
    "bench_metrics.py": ["--repeat", "1"],
    "bench_scale.py": ["--videos", "150"],
    "bench_startup.py": ["--repeat", "1"],
    "bench_step.py": ["--batch-sizes", "4", "--steps", "1", "--threads", "1", "--device", "cpu"],
    "bench_quick_model.py": ["--runs", "{tmp}/runs", "--epochs", "1"],
    "bench_subwords.py": ["--epochs", "1"],
    "bench_supervision.py": ["--n", "500", "--epoch-sizes", "500", "1500", "--repeat", "1"],
    "bench_text_encoders.py": ["--limit", "20"],
    "bench_video_bomb.py": ["--side", "4000", "--clients", "2", "--rounds", "1"],
    "bench_zero_shot.py": ["--out", "{tmp}/zero-shot", "--seeds", "0", "--only", "e5-mr",
                           "--epochs", "1"],
}


def test_every_benchmark_is_listed():
    scripts = {p.name for p in (ROOT / "benchmarks").glob("bench_*.py")}
    assert scripts == set(SMALL)


@pytest.mark.slow
@pytest.mark.parametrize("script", sorted(SMALL))
def test_the_benchmark_runs(script, tmp_path):
    # TMPDIR: the scripts' temporary folders land in pytest's, which pytest prunes
    env = {**os.environ, "PYTHONPATH": str(ROOT), "OMP_NUM_THREADS": "1", "TMPDIR": str(tmp_path)}
    flags = [flag.replace("{tmp}", str(tmp_path)) for flag in SMALL[script]]
    done = subprocess.run([sys.executable, str(ROOT / "benchmarks" / script), *flags],
                          capture_output=True, text=True, timeout=600, env=env, cwd=ROOT,
                          check=False)
    assert done.returncode in (0, 1) and "Traceback" not in done.stderr, (
        f"exit code {done.returncode}\n{done.stdout[-3000:]}\n{done.stderr[-3000:]}")
    assert done.stdout.strip(), "the benchmark printed no figures"
    assert not list(tmp_path.glob("rudder-*")), "the benchmark left its temporary folder behind"


def test_the_step_baseline_loss_is_collaborative_experts_loss():
    # bench_step's baseline uses CE's MaxMarginRankingLoss(fix_norm=True): both directions
    # against the diagonal, the diagonal terms dropped: rudder's mm (checked against CE)
    import torch

    sys.path.insert(0, str(ROOT / "benchmarks"))
    try:
        from reference_ce import max_margin_loss
    finally:
        sys.path.remove(str(ROOT / "benchmarks"))
    from rudder import losses

    sims = torch.randn(6, 6, generator=torch.Generator().manual_seed(0))
    assert float(max_margin_loss(sims, 0.2)) == pytest.approx(
        float(losses.build("mm", margin=0.2)(sims)), rel=1e-6)


def load(script: str):
    """The benchmark script ``benchmarks/<script>.py`` imported as a module."""
    spec = importlib.util.spec_from_file_location(script, ROOT / "benchmarks" / f"{script}.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.fixture
def own_tmp(monkeypatch, tmp_path):
    """tempfile's folders go to ``tmp_path``, so that the scripts' leftovers (``rudder-*``;
    torch adds its own cache folder) can be counted."""
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    return tmp_path


@pytest.fixture
def torch_threads():
    import torch

    threads = torch.get_num_threads()
    yield
    torch.set_num_threads(threads)


def test_bench_step_exits_1_when_a_row_misses_its_target(monkeypatch, own_tmp, torch_threads,
                                                        capsys):
    bench_step = load("bench_step")
    monkeypatch.setattr(bench_step.Trainer, "_step", lambda self, videos, slots: time.sleep(0.02))
    monkeypatch.setattr(bench_step, "reference_step", lambda *args: None)  # ratio in the 1000s
    code = bench_step.main(["--batch-sizes", "64", "4", "--steps", "1", "--threads", "2",
                            "--device", "cpu"])
    rows = [line for line in capsys.readouterr().out.splitlines() if line.startswith("| ")]
    assert code == 1
    assert rows[-2].startswith("| 64 |") and rows[-2].endswith("<= 0.70x: MISSED |")
    assert rows[-1].startswith("| 4 |") and rows[-1].endswith("none documented |")
    assert not list(own_tmp.glob("rudder-*")), "bench_step left its temporary folder behind"


def test_bench_step_targets_are_the_readme_rows():
    bench_step = load("bench_step")
    target = bench_step.documented_target
    assert target(False, False, 64, 2) == 0.7
    assert target(False, False, 64, 1) is None and target(False, False, 128, 2) is None
    assert target(True, True, 128, 2) == target(True, True, 256, 1) == 0.25
    assert target(True, False, 256, 2) is None and target(True, True, 64, 2) is None
    verdict = bench_step.verdict
    assert verdict(0.69, 0.7) == "OK" and verdict(0.71, 0.7) == "MISSED"
    assert verdict(0.2, 0.25, wall_over_kernels=1.4) == "OK"
    assert verdict(0.2, 0.25, wall_over_kernels=1.6) == "MISSED"
    assert verdict(5.0, None) == "none documented"


def test_bench_metrics_exits_3_when_outputs_differ(monkeypatch):
    bench_metrics = load("bench_metrics")
    metrics, reference = bench_metrics.metrics, bench_metrics.reference

    def rank_case(rng):  # rudder's R1 off by one point on a small matrix
        sims = rng.standard_normal((300, 300), dtype=np.float32)
        return (lambda: [{**metrics.retrieval_metrics(sims), "R1": -1.0}],
                lambda: [reference.ce_t2v_metrics(sims)])

    def relevance_case(rng):
        sims, relevance = rng.random((50, 40)), (rng.random((50, 40)) > 0.5).astype(np.float32)
        return (lambda: [metrics.relevance_metrics(sims, relevance)["nDCG"]],
                lambda: [reference.epic_ndcg(sims, relevance)])

    monkeypatch.setattr(bench_metrics, "rank_case", rank_case)
    monkeypatch.setattr(bench_metrics, "relevance_case", relevance_case)
    assert bench_metrics.main(["--repeat", "1"]) == 3


SMALL_INDEX = ["--videos", "3000", "--queries", "2", "--batch", "4", "--rounds", "1"]


def test_bench_index_exits_3_when_faiss_finds_other_videos(monkeypatch, torch_threads):
    pytest.importorskip("faiss")
    bench_index = load("bench_index")

    class Shifted(bench_index.FaissSearch):
        def search(self, text_emb, text_logits, k=10):
            found = super().search(text_emb, text_logits, k=k)
            found.indices = (found.indices + 1) % 3000
            return found

    monkeypatch.setattr(bench_index, "FaissSearch", Shifted)
    assert bench_index.main(SMALL_INDEX) == 3


def test_bench_index_without_faiss_exits_4_unless_told_to_skip_it(monkeypatch, torch_threads,
                                                                  capsys):
    bench_index = load("bench_index")
    monkeypatch.setitem(sys.modules, "faiss", None)  # import faiss raises ImportError
    assert bench_index.main(SMALL_INDEX) == 4
    assert "NOT CHECKED (exit code 4)" in capsys.readouterr().out
    assert bench_index.main([*SMALL_INDEX, "--skip-faiss"]) == 0
    assert "PASS (exit code 0)" in capsys.readouterr().out


def test_bench_feature_loading_removes_its_temporary_folder(own_tmp):
    bench_feature_loading = load("bench_feature_loading")
    assert bench_feature_loading.main(["--videos", "20", "--repeat", "1"]) in (0, 1)
    assert not list(own_tmp.glob("rudder-*"))


@pytest.mark.slow
def test_bench_annotation_tags_only_the_training_captions_of_the_run_languages(tmp_path):
    # The lexicon tagger (no trained model needed) stands in for Stanza: the copy's training
    # captions in mr/hi/en carry what `heuristics label` writes, the rest is the sample's.
    from heuristics.classes import lexicon_entries, read_lexicon
    from heuristics.label import annotate
    from heuristics.lexicon_tagger import LexiconTagger
    from heuristics.nouns_verbs import ExtractionOptions
    from heuristics.stop_nouns import default_stop_nouns
    from heuristics.studies.indic_sample import LEXICON
    from rudder.data.layout import DatasetFolder
    from rudder.data.lookup import resolve_dataset

    bench = load("bench_annotation")
    sample = resolve_dataset("sample")
    before = {split: sample.captions(split) for split in ("train", "validation", "test")}
    tagger = LexiconTagger(lexicon_entries(read_lexicon(LEXICON)))
    copy = DatasetFolder(bench.tagged_sample(sample, tagger, ("mr", "hi", "en"),
                                             tmp_path / "sample"))
    for split in ("validation", "test"):
        assert copy.captions(split).equals(before[split])
    train, old = copy.captions("train").to_pandas(), before["train"].to_pandas()
    assert train["caption_id"].tolist() == old["caption_id"].tolist()
    other = ~old["lang"].isin(["mr", "hi", "en"])
    assert other.any() and train[other].equals(old[other])
    tagged = train[~other]
    assert (tagged["noun_classes"].map(list) != old[~other]["noun_classes"].map(list)).any()
    expected = annotate(before["train"], tagger, read_lexicon(LEXICON), ExtractionOptions(),
                        stop_nouns=default_stop_nouns(), only=("mr", "hi", "en")).to_pandas()
    for column in ("nouns", "verbs", "noun_classes", "verb_classes"):
        assert train[column].map(list).tolist() == expected[column].map(list).tolist()
    assert sample.captions("train").equals(before["train"])  # the sample itself is untouched
