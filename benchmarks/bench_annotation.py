"""Benchmark: do the candidate queues make manual labels pay for themselves? (SIMULATED data)

On the embedded sample (simulated), a simulated annotator replays the sample's manual
relations: the generator's labelling rule (``rudder.data.sample.relation_labels``), checked
to give every one of the sample's 6,000 stored relations, applied to whatever pair a queue
shows, with a label replaced by a random other one at ``--error-rate``; a second annotator
(the same rule, errors of its own) labels the pairs the app shows to two annotators
(``--double-share``). The queues never see these answers: they read the captions' noun/verb
classes (the heuristic), the model's ranking and nothing else.

What the heuristic reads (``--heuristic``): by default, as on real data, tagger output: a
copy of the sample whose training captions in mr, hi and en are labelled as ``python -m
heuristics label`` labels them (the Stanza taggers of ``--tagger-dir``, trained offline by
``python -m heuristics train-tagger``; the sample's lexicon as class map); validation and
test keep the generator's classes, which the evaluation's relevance reads. Every run of (b)
and every queue trains on and reads that copy. ``generator``: the generator's own classes,
which are the simulated annotators' marks, so a manual label carries almost nothing new.

(a) Judgments per 100 candidates shown, for the first 100, 300 and 1,000 pairs of each
    queue (``model-disagreement``, today's ``heuristic`` order, ``random``): every partial
    and positive judgment, and the *new* ones, whose label differs from the heuristic label
    that training uses without them. Goal, on new judgments: model-disagreement at least 3x
    random and above today's order at every size. (Today's order shows the pairs the
    heuristic already calls positive or partial, so nearly all its judgments are partial or
    positive, by construction; they add little to what training had.)
(b) Test text-to-video R@10 and nDCG of PO(M) retrained (the ``python -m heuristics
    retrain --only-app-labels`` config: ``heuristics.retrain.retrain_config``) on the
    settled labels of the first 100, 300 and 1,000 pairs of each queue, ``--seeds`` seeds,
    next to heuristic-only PO and PO(M) with every manual relation of the sample (the same
    retrain config with the sample's 6,000 relations as its relations file). The
    model-disagreement queue is built from the seed-0 PO run (the app's current model).
    Controls: the largest size's pairs of the model and random queues labelled with the
    heuristic's own labels (no new information), to tell the labels' effect from that of the
    relation-aware batches they put together.
    Goals: model-disagreement above random at every size (R@10 and nDCG, mean over seeds);
    at the largest size at least half the gap from PO to PO(M)-with-every-label closed,
    ``model - PO >= (every - PO) / 2`` (with a negative gap, as on the sample: the labels
    lower PO by at most half of what every manual label does).
(c) Krippendorff's alpha (ordinal and nominal) of the two simulated annotators on the
    double-labelled pairs of the first ``--alpha-pairs`` pairs of the model-disagreement and
    random queues, next to each error rate that produced it (no goal: how alpha reads a
    known error rate, and how it depends on which pairs are labelled).
(d) The annotation tab with the model queue of the whole sample stored and ``--labels``
    labels in the database: milliseconds of a label followed by the queue's next pair
    (``AnnotateTab.label``), median of ``--rounds``; goal under ``--tab-target`` ms.

Prints the machine (CPU, load, threads) first. Exit code: 1 when a goal is missed, 2 when
a tagger model is missing (the message names the command that trains it), 3 when the
simulated annotator does not replay the stored relations, 4 when (b) is skipped
(``--skip-training``: its goals are unchecked), else 0.
Usage: ``python benchmarks/bench_annotation.py [--seeds 0 1 2] [--epochs 10]
[--tagger-dir DIR | --heuristic generator]``.
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT), str(ROOT / "benchmarks")]
from machine import machine_line  # benchmarks/machine.py, beside this script

MISSED, USAGE, DIFFERENT, NOT_CHECKED = 1, 2, 3, 4  # exit codes
STRATEGIES = ("model-disagreement", "heuristic", "random")
CONTROLS = ("model-disagreement", "random")  # retrained on their pairs' heuristic labels too
TAGGED_LANGS = ("mr", "hi", "en")  # the training languages of the runs (the sample's default)
LANGS = f"data.caption_langs=[{', '.join(TAGGED_LANGS)}]"  # also on the tagged copy of the sample


# ------------------------------------------------------------------ the annotators
class Truth:
    """The sample generator's labelling rule over the app collection's captions."""

    def __init__(self, collection):
        from rudder.data.sample_text import ACTIONS, MATERIALS

        captions = collection.captions
        self.row_of = collection.row_of
        self.video = captions["video_id"].to_numpy()
        self.segment = captions["caption_id"].str.rsplit("-", n=1).str[1].astype(int).to_numpy()
        self.kind = captions["kind"].to_numpy()
        self.nouns = hot(captions["noun_classes"], MATERIALS)
        self.verbs = hot(captions["verb_classes"], ACTIONS)

    def labels(self, a: np.ndarray, b: np.ndarray) -> np.ndarray:
        from rudder.data.sample import relation_labels

        same_video = self.video[a] == self.video[b]
        return relation_labels(same_video, same_video & (self.segment[a] == self.segment[b]),
                               self.kind[a], self.kind[b], self.segment[a], self.segment[b],
                               self.nouns[a], self.nouns[b], self.verbs[a], self.verbs[b])

    def replays(self, relations) -> tuple[int, int]:
        """(matching, all) of the sample's stored relations against the rule."""
        table = relations.to_pandas()
        a = self.row_of.reindex(table["caption_id_a"]).to_numpy()
        b = self.row_of.reindex(table["caption_id_b"]).to_numpy()
        return int((self.labels(a, b) == table["label"].to_numpy()).sum()), len(table)


def hot(lists, vocabulary) -> np.ndarray:
    column = {name: k for k, name in enumerate(vocabulary)}
    out = np.zeros((len(lists), len(vocabulary)), dtype=bool)
    for row, names in enumerate(lists):
        out[row, [column[n] for n in names]] = True
    return out


def noisy(labels: np.ndarray, error_rate: float, rng) -> np.ndarray:
    """``labels`` with a share ``error_rate`` replaced by a uniformly drawn other label."""
    wrong = rng.random(len(labels)) < error_rate
    shift = rng.integers(1, 4, size=len(labels))
    return np.where(wrong, (labels + shift) % 4, labels).astype(np.int8)


# -------------------------------------------------------------- the heuristic's input
def tagged_sample(folder, tagger, langs, out: Path, cache=None) -> Path:
    """A copy of the sample at ``out`` whose training captions in ``langs`` carry
    ``tagger``'s output in ``nouns``/``verbs``/``noun_classes``/``verb_classes``, as
    ``python -m heuristics label`` writes them (the sample's lexicon as class map, every
    class-map rule, the default stop nouns); the validation and test captions keep the
    generator's classes, which the evaluation's relevance reads."""
    import shutil

    from heuristics.classes import read_lexicon
    from heuristics.label import annotate
    from heuristics.nouns_verbs import ExtractionOptions
    from heuristics.stop_nouns import default_stop_nouns
    from heuristics.studies.indic_sample import LEXICON
    from rudder.data.layout_writer import replace_tables

    for lang in langs:
        tagger.model_id(lang)  # a missing model stops here, with the command that trains it
    shutil.copytree(folder.root, out)
    table = annotate(folder.captions("train"), tagger, read_lexicon(LEXICON),
                     ExtractionOptions(), cache, stop_nouns=default_stop_nouns(),
                     only=tuple(langs))
    replace_tables(out, "captions", {"train": table})
    return out


def class_agreement(manual, tagged, langs) -> str:
    """Per language, the share of the training captions whose tagger noun-class and
    verb-class sets both equal the generator's (classes outside the lexicon dropped, as
    ``heuristics.studies.indic_sample`` compares them)."""
    def known(classes):
        return frozenset(c for c in classes if not c.startswith(("noun:", "verb:")))

    train = manual["split"].to_numpy() == "train"
    parts = []
    for lang in langs:
        keep = train & (manual["lang"].to_numpy() == lang)
        same = [known(a) == known(b) and known(c) == known(d) for a, b, c, d in zip(
            manual["noun_classes"][keep], tagged["noun_classes"][keep],
            manual["verb_classes"][keep], tagged["verb_classes"][keep], strict=True)]
        parts.append(f"{lang} {100 * np.mean(same):.1f}% of {keep.sum():,}")
    return "training captions whose noun and verb class sets are the generator's: " + (
        ", ".join(parts))


def tagged_models(model_dir) -> str:
    """Where the taggers are and what they were trained on (their ``rudder_tagger.json``)."""
    import json

    from heuristics.taggers import model_dir as resolve

    root = resolve(model_dir)
    trained = []
    for lang in TAGGED_LANGS:
        info = root / lang / "rudder_tagger.json"
        data = json.loads(info.read_text()) if info.is_file() else {}
        train = data.get("train") or {}
        trained.append(f"{lang} on {Path(str(train.get('path', '?'))).name} "
                       f"({train.get('sentences', '?')} sentences)")
    return f"{root}: " + ", ".join(trained)


# ----------------------------------------------------------------------- queues
def build_queues(collection, run_dir: Path, cache: Path) -> dict:
    """The three queues over the training captions of the run's languages."""

    from app.engine import SearchEngine
    from app.pair_queue import QueueBuilder, model_scores
    from rudder.evaluation.loading import load_run

    run = load_run(run_dir)
    engine = SearchEngine(run.model, run.vocab, collection, encode=run.encode_queries,
                          model_key=run.fingerprint, max_words=run.config.data.max_words,
                          max_frames=run.config.data.max_frames, cache_dir=cache,
                          train_langs=run.config.data.caption_langs)
    builder = QueueBuilder(collection, run.config.data.caption_langs)
    started = time.perf_counter()
    queues = {"model-disagreement": builder.model_disagreement(*model_scores(engine, builder))}
    seconds = {"model-disagreement": time.perf_counter() - started}
    for name in ("heuristic", "random"):
        started = time.perf_counter()
        queues[name] = builder.heuristic() if name == "heuristic" else builder.random()
        seconds[name] = time.perf_counter() - started
    for name, queue in queues.items():
        print(f"queue {name}: {len(queue):,} pairs over {len(builder.rows):,} training "
              f"captions, built in {seconds[name]:.1f} s")
    return queues


def judged(queue, n: int, truth: Truth, error_rate: float, annotator: int = 1,
           seed: int = 0) -> np.ndarray:
    """An annotator's labels of the first ``n`` pairs: the rule's, with errors drawn per
    pair position (so the first 100 pairs get the same labels in every budget)."""
    rng = np.random.default_rng([annotator, seed])
    wrong = rng.random(len(queue))[:n] < error_rate
    shift = rng.integers(1, 4, size=len(queue))[:n]
    labels = truth.labels(queue.a[:n], queue.b[:n])
    return np.where(wrong, (labels + shift) % 4, labels).astype(np.int8)


def part_a(queues, truth, sizes, error_rate) -> tuple[list[str], bool]:
    lines, ok = [], True
    header = "| queue | pairs shown | partial+positive per 100 | new partial+positive per 100 |"
    lines += [("(a) judgments per 100 candidates shown (annotator error rate "
              f"{error_rate:g}):"), header, "|---|---|---|---|"]
    found = {}
    for name, queue in queues.items():
        for n in sizes:
            labels = judged(queue, n, truth, error_rate)
            relevant = np.isin(labels, (1, 2))
            new = relevant & (labels != queue.heuristic[:n])
            found[name, n] = 100 * new.mean()
            lines.append(f"| {name} | {n:,} | {100 * relevant.mean():.1f} | "
                         f"{100 * new.mean():.1f} |")
    for n in sizes:
        model, random_, today = (found[s, n] for s in STRATEGIES[:1] + ("random", "heuristic"))
        met = model >= 3 * random_ and model > today
        ok &= met
        lines.append(f"goal at {n:,}: new judgments {model:.1f} >= 3 x random {random_:.1f} and "
                     f"> today's order {today:.1f} -> {'OK' if met else 'MISSED'}")
    return lines, ok


# ---------------------------------------------------------------------- training
def settled_table(queue, n: int, truth: Truth, error_rate: float, share: float, seed: int):
    """The settled labels of the first ``n`` pairs: annotator 1 on all of them, annotator 2
    on the double-labelled ones, settled as the app settles them (ties left out)."""
    from app.annotations_db import doubled
    from rudder.evaluation.agreement import settle

    ids = truth.row_of.index.to_numpy()
    a, b = ids[queue.a[:n]], ids[queue.b[:n]]
    first = judged(queue, n, truth, error_rate, annotator=1, seed=seed)
    second = judged(queue, n, truth, error_rate, annotator=2, seed=seed)
    records = [{"dataset": "sample", "caption_id_a": x, "caption_id_b": y, "annotator": "one",
                "label": int(label), "time": "2026-01-01T00:00:00+00:00"}
               for x, y, label in zip(a, b, first, strict=True)]
    records += [{"dataset": "sample", "caption_id_a": x, "caption_id_b": y, "annotator": "two",
                 "label": int(label), "time": "2026-01-01T00:00:00+00:00"}
                for x, y, label in zip(a, b, second, strict=True) if doubled(x, y, share)]
    settled, _ = settle(records)
    return pa.table({
        "caption_id_a": pa.array([r["caption_id_a"] for r in settled], pa.string()),
        "caption_id_b": pa.array([r["caption_id_b"] for r in settled], pa.string()),
        "label": pa.array([r["label"] for r in settled], pa.int8()),
        "annotator": pa.array(["settled"] * len(settled), pa.string()),
    })


def heuristic_table(queue, n: int, truth: Truth):
    """The first ``n`` pairs labelled with the heuristic's own labels: a control that tells
    what the relation-aware batches do with labels that carry no new information."""
    ids = truth.row_of.index.to_numpy()
    return pa.table({
        "caption_id_a": pa.array(ids[queue.a[:n]].tolist(), pa.string()),
        "caption_id_b": pa.array(ids[queue.b[:n]].tolist(), pa.string()),
        "label": pa.array(queue.heuristic[:n], pa.int8()),
        "annotator": pa.array(["heuristic"] * n, pa.string()),
    })


def train(config, out: Path, relations=None) -> dict:
    """Train ``config`` into ``out`` (with ``relations`` as its relations file); test t2v."""
    from rudder import train as trainer

    files = {}
    if relations is not None:
        pq.write_table(relations, out.parent / f"{out.name}.parquet")
        files = {"relations.parquet": out.parent / f"{out.name}.parquet"}
    result = trainer.run(config, out, files=files)
    return result["test"]["t2v"]


def part_b(queues, truth, args, work: Path, reference_runs,
           every_relation) -> tuple[list[str], bool]:
    from heuristics.retrain import retrain_config

    scores: dict = {}
    for seed in args.seeds:
        scores["PO", seed] = reference_runs[seed]
        config = retrain_config(args.dataset, epochs=args.epochs, seed=seed, overrides=[LANGS])
        scores["PO(M) every label", seed] = train(config, work / f"pom-all-{seed}",
                                                  every_relation)
        for name, queue in queues.items():
            for n in args.sizes:
                table = settled_table(queue, n, truth, args.error_rate, args.double_share, seed)
                scores[name, n, seed] = train(config, work / f"{name}-{n}-{seed}", table)
                print(f"  trained {name} {n} seed {seed}: R@10 "
                      f"{scores[name, n, seed]['R10']:.1f}", file=sys.stderr, flush=True)
        for name in CONTROLS:  # the same pairs with the heuristic's own labels
            table = heuristic_table(queues[name], max(args.sizes), truth)
            scores[f"{name}, heuristic labels", seed] = train(
                config, work / f"{name}-control-{seed}", table)

    def mean(key, metric):
        values = [scores[(*key, seed)][metric] for seed in args.seeds]
        return float(np.mean(values)), float(np.std(values, ddof=1)) if len(values) > 1 else 0.0

    lines = [(f"(b) test text->video after retraining PO(M) on the settled labels, mean ± std "
             f"over seeds {', '.join(map(str, args.seeds))} ({args.epochs} epochs):"),
             "| run | labels | R@10 | nDCG |", "|---|---|---|---|"]
    for reference in ("PO", "PO(M) every label"):
        r10, ndcg = mean((reference,), "R10"), mean((reference,), "nDCG")
        labels = "0 (heuristic only)" if reference == "PO" else "6,000 (the sample's relations)"
        lines.append(f"| {reference} | {labels} | {r10[0]:.1f} ± {r10[1]:.1f} | "
                     f"{ndcg[0]:.1f} ± {ndcg[1]:.1f} |")
    for name in queues:
        for n in args.sizes:
            r10, ndcg = mean((name, n), "R10"), mean((name, n), "nDCG")
            lines.append(f"| {name} | {n:,} | {r10[0]:.1f} ± {r10[1]:.1f} | "
                         f"{ndcg[0]:.1f} ± {ndcg[1]:.1f} |")
    for name in CONTROLS:
        key = (f"{name}, heuristic labels",)
        r10, ndcg = mean(key, "R10"), mean(key, "nDCG")
        lines.append(f"| {key[0]} (control: no new information) | {max(args.sizes):,} | "
                     f"{r10[0]:.1f} ± {r10[1]:.1f} | {ndcg[0]:.1f} ± {ndcg[1]:.1f} |")
    ok = True
    for n in args.sizes:
        for metric in ("R10", "nDCG"):
            model, random_ = mean(("model-disagreement", n), metric)[0], mean(("random", n),
                                                                               metric)[0]
            met = model > random_
            ok &= met
            lines.append(f"goal at {n:,}, {metric}: model-disagreement {model:.2f} > random "
                         f"{random_:.2f} -> {'OK' if met else 'MISSED'}")
    largest = max(args.sizes)
    for metric in ("R10", "nDCG"):
        po, every = mean(("PO",), metric)[0], mean(("PO(M) every label",), metric)[0]
        model = mean(("model-disagreement", largest), metric)[0]
        gap = every - po
        met = model - po >= gap / 2
        ok &= met
        note = ("" if gap > 0 else "; the gap is negative: every manual label of the sample "
                "lowers PO, and the goal asks that these labels lower it by at most half as "
                "much")
        lines.append(f"goal at {largest:,}, {metric}: model-disagreement {model:.2f} - PO "
                     f"{po:.2f} >= half the gap to PO(M) every label {every:.2f} "
                     f"({gap / 2:+.2f}){note} -> {'OK' if met else 'MISSED'}")
    return lines, ok


# -------------------------------------------------------------------- agreement
def part_c(queues, truth, args) -> list[str]:
    from app.annotations_db import doubled
    from rudder.evaluation.agreement import krippendorff_alpha

    ids = truth.row_of.index.to_numpy()
    lines = [("(c) Krippendorff's alpha of two simulated annotators on the double-labelled "
             f"pairs (share {args.double_share:g}) of the first {args.alpha_pairs:,} pairs "
             "of a queue:"),
             ("| queue | double-labelled pairs | error rate | alpha ordinal (negative < partial "
             "< positive) | alpha nominal |"), "|---|---|---|---|---|"]
    for name in ("model-disagreement", "random"):
        queue = queues[name]
        n = min(args.alpha_pairs, len(queue))
        keep = np.array([doubled(x, y, args.double_share)
                         for x, y in zip(ids[queue.a[:n]], ids[queue.b[:n]], strict=True)])
        true = truth.labels(queue.a[:n][keep], queue.b[:n][keep])
        for rate in args.alpha_rates:
            one = noisy(true, rate, np.random.default_rng([11, int(rate * 1000)]))
            two = noisy(true, rate, np.random.default_rng([12, int(rate * 1000)]))
            data = np.stack([one, two]).astype(float)
            scale = np.where(data == 3, np.nan, data)  # description: no value on the scale
            ordinal = krippendorff_alpha(scale, "ordinal")
            nominal = krippendorff_alpha(data, "nominal")
            lines.append(f"| {name} | {len(true):,} | {rate:g} | {number(ordinal)} | "
                         f"{number(nominal)} |")
    return lines


def number(value) -> str:
    return "n/a" if value is None else f"{value:.3f}"


# --------------------------------------------------------------------------- tab
def part_d(collection, queue, args, work: Path) -> tuple[list[str], bool]:
    from app.annotate_handlers import ANY, AnnotateTab
    from app.annotations_db import AnnotationStore
    from app.queue_service import QueueService

    store = AnnotationStore(work / "tab.sqlite")
    ids, langs = collection.captions["caption_id"].to_numpy(), collection.captions["lang"]
    langs = langs.to_numpy()
    rows = list(zip(ids[queue.a].tolist(), ids[queue.b].tolist(), langs[queue.a].tolist(),
                    langs[queue.b].tolist(), queue.value.tolist(), queue.heuristic.tolist(),
                    queue.model_rank.tolist(), strict=True))
    name = collection.name
    model = SimpleNamespace(train_langs=("mr", "hi", "en"), index=SimpleNamespace(key="bench"))
    queues = QueueService(store, {name: collection}, lambda _: model)
    started = time.perf_counter()
    store.replace_queue(name, "model-disagreement", rows, queues.key(name, "model-disagreement"),
                        queues.share)
    stored = time.perf_counter() - started
    filler = [(f"annotator-{i % 5}", ids[queue.a[i]], ids[queue.b[i]]) for i in range(args.labels)]
    for who, a, b in filler:
        store.add(name, who, a, b, "partial")
    tab = AnnotateTab(store, {name: collection}, queues=queues)
    shown = tab.next_unlabelled("timer", name, ANY, "model-disagreement")
    times = []
    for _ in range(args.rounds):
        started = time.perf_counter()
        shown = tab.label("partial", "timer", name, shown.query_id, shown.candidate_id, ANY,
                          "model-disagreement")
        times.append(1000 * (time.perf_counter() - started))
    median = float(np.median(times))
    ok = median < args.tab_target
    return [(f"(d) annotation tab: model queue of {len(rows):,} pairs stored in {stored:.1f} s; "
            f"with {args.labels:,} labels in the database a label and the next queue pair take "
            f"{median:.0f} ms (median of {args.rounds}, max {max(times):.0f}), target < "
            f"{args.tab_target:g} ms -> {'OK' if ok else 'MISSED'}")], ok


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    parser.add_argument("--epochs", type=int, default=10, help="epochs of every run (default 10)")
    parser.add_argument("--sizes", type=int, nargs="+", default=[100, 300, 1000],
                        help="labels per strategy (default 100 300 1000)")
    parser.add_argument("--error-rate", type=float, default=0.1,
                        help="the simulated annotators' error rate (default 0.1)")
    parser.add_argument("--double-share", type=float, default=0.1,
                        help="share of pairs labelled twice (default 0.1, as the app)")
    parser.add_argument("--alpha-rates", type=float, nargs="+", default=[0.0, 0.05, 0.1, 0.2,
                                                                          0.3])
    parser.add_argument("--alpha-pairs", type=int, default=20_000,
                        help="model-queue pairs of (c) (default 20000)")
    parser.add_argument("--labels", type=int, default=5000,
                        help="labels in the database of (d) (default 5000)")
    parser.add_argument("--rounds", type=int, default=30, help="labels timed in (d)")
    parser.add_argument("--tab-target", type=float, default=250.0, help="ms (default 250)")
    parser.add_argument("--skip-training", action="store_true",
                        help="(a), (c) and (d) only; (b) is then unchecked")
    parser.add_argument("--heuristic", choices=("tagger", "generator"), default="tagger",
                        help="what the heuristic reads in the training captions: Stanza "
                        "tagger output (default, as on real data) or the generator's classes")
    parser.add_argument("--tagger-dir", type=Path, default=None,
                        help="Stanza models of mr, hi and en from `python -m heuristics "
                        "train-tagger` (default: heuristics.taggers.model_dir)")
    args = parser.parse_args(argv)
    from app.collection import Collection
    from heuristics.taggers import StanzaTagger, TagCache, TaggerError
    from rudder.config import from_dict
    from rudder.data.layout import DatasetFolder
    from rudder.data.lookup import resolve_dataset

    print(machine_line(), flush=True)
    print("dataset: the embedded sample, SIMULATED captions and features")
    folder = resolve_dataset("sample")
    sample = Collection(folder)
    truth = Truth(sample)
    matching, total = truth.replays(folder.relations())
    print(f"the simulated annotator gives {matching:,} of the sample's {total:,} stored "
          "relations")
    if matching != total:
        return DIFFERENT
    code_missed, unchecked = False, args.skip_training
    with tempfile.TemporaryDirectory(prefix="rudder-bench-annotation-") as tmp:
        work = Path(tmp)
        args.dataset, collection = "sample", sample
        if args.heuristic == "tagger":
            started = time.perf_counter()
            try:
                tagged = tagged_sample(folder, StanzaTagger(args.tagger_dir), TAGGED_LANGS,
                                       work / "sample", TagCache())
            except TaggerError as error:
                print(f"error: {error}", file=sys.stderr)
                return USAGE
            args.dataset, collection = str(tagged), Collection(DatasetFolder(tagged))
            if not (collection.captions["caption_id"] == truth.row_of.index).all():
                raise RuntimeError("the tagged copy of the sample lists its captions in "
                                   "another order than the sample")
            print(f"heuristic input: Stanza tagger output ({tagged_models(args.tagger_dir)}) "
                  f"in {time.perf_counter() - started:.0f} s; "
                  + class_agreement(sample.captions, collection.captions,
                                    TAGGED_LANGS))
        else:
            print("heuristic input: the generator's noun/verb classes (the simulated "
                  "annotators' own marks)")
        references = {}
        for seed in args.seeds:
            config = from_dict({"loss": {"name": "po"}, "epochs": args.epochs, "seed": seed,
                                "data": {"dataset": args.dataset,
                                         "caption_langs": list(TAGGED_LANGS)}})
            references[seed] = train(config, work / f"po-{seed}")
        queues = build_queues(collection, work / f"po-{args.seeds[0]}", work / "index")
        lines, ok = part_a(queues, truth, args.sizes, args.error_rate)
        print("\n".join(lines), flush=True)
        code_missed |= not ok
        if not args.skip_training:
            lines, ok = part_b(queues, truth, args, work, references, folder.relations())
            print("\n".join(lines), flush=True)
            code_missed |= not ok
        print("\n".join(part_c(queues, truth, args)), flush=True)
        lines, ok = part_d(collection, queues["model-disagreement"], args, work)
        print("\n".join(lines), flush=True)
        code_missed |= not ok
    print(f"after the runs: load {', '.join(f'{x:.2f}' for x in os.getloadavg())}")
    return MISSED if code_missed else NOT_CHECKED if unchecked else 0


if __name__ == "__main__":
    sys.exit(main())
