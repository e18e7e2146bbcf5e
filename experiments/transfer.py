"""Cross-lingual transfer to languages without training captions, on a dataset (default:
the embedded, simulated sample): true zero-shot and few-shot, over seeds.

``python -m experiments.transfer [--out DIR] [--seeds 0 1 2] [--only ROW ...] [--report F]``
trains CE with frozen multilingual-e5 sentence vectors on Marathi captions (and, in the rows
that say so, on Hindi and English as well) and ranks the test captions of every language as
text-to-video queries over all test videos. Protocol:

- **Zero-shot** rows train on a copy of the dataset whose *training* split has no Tamil or
  Telugu caption (``DIR/data/no-tate``; the validation and test splits are untouched, and
  only the training languages' validation captions are read during training). Every
  statistic of the sentence transforms is fitted on the training languages' captions of
  that copy (``data.sentence_fit_langs``; a row that fits on other languages' captions says
  so), so no Tamil or Telugu text is used anywhere: those languages are zero-shot, and so is
  any other language no row's training or fitting read (the table marks each cell).
- **Few-shot** rows keep the Tamil and Telugu training captions of a seeded fraction of the
  videos that have them (``DIR/data/tateNN-seedS``), and fit every statistic on those only.
- **Ratios** divide a language's test R@10 by Marathi's: *overall* (every query of each
  language) and *paired* (only the queries whose segment, same video, start and end, also
  has a Marathi test caption, against those Marathi captions).
- **Seeds** (default 0, 1, 2): each cell is the mean over seeds with a 95% Student-t
  interval over the seeds' values (Student 1908; ``t(0.975, n-1)``, 4.30 for 3 seeds).
- **Choice without target-language data**: the row reported as *chosen* is the zero-shot
  row trained on Marathi only with the best mean Marathi validation t2v R@10 (ties: the
  earlier row); the number of pivots k of the zero-shot path, and for a row that tries it
  the number m of translation-difference directions removed before the pivot search
  (``data.sentence_pivot_nullspace``, :data:`NULLSPACES`) and the passage prompt on the
  captions searched, are chosen on Marathi validation too (:func:`pivot_proxy`: Marathi
  validation queries answered through their k nearest *other* training captions, the
  query's own text left out of the pool).
- **Diagnostic, not zero-shot**: :func:`oracle` fits the Tamil and Telugu statistics on
  their own test captions (transductive); reported beside the table, never as a row.

Finished runs and evaluations are reused (``DIR/runs``, ``DIR/evaluated``), so the command
resumes after a kill. Every training command is printed, so each run can be reproduced by
hand. ``--report F`` writes the Markdown report (``experiments/results/transfer-sample.md``
is this command's output with the default arguments).
"""

from __future__ import annotations

import argparse
import json
import math
import shutil
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from rudder.atomic import atomic_write_text, staged_folder, swap_into_place
from rudder.data.lookup import resolve_dataset
from rudder.runs.layout import metrics_file

LANGS = ["mr", "hi", "ta", "te", "en"]
SOURCE, TARGETS = "mr", ("ta", "te")
K = 10  # the reported metric: t2v R@10
PIVOT_KS = (1, 5, 20)
# m of data.sentence_pivot_nullspace tried by the proxy (0: off), fixed before any test run
NULLSPACES = (0, 8, 16, 32, 64)
# A second pivot pool for the zero-shot rows: English, the hub of multilingual-e5's training
# pairs, whose training captions stand for the Marathi captions of the same segments
# (data.sentence_pivot_langs). Reported, not chosen: Marathi data cannot compare it.
PIVOT_HUB = "en"
E5 = ("data.text_encoder=multilingual-e5",)
WHITEN = (*E5, "data.sentence_whitening=true")
FIT_3 = "data.sentence_fit_langs=[mr,hi,en]"


@dataclass(frozen=True)
class Training:
    """One training configuration: its caption languages, ``--set`` values, the fraction of
    the ta/te training captions kept (None: none, the zero-shot copy) and its source."""

    langs: tuple[str, ...]
    settings: tuple[str, ...]
    fraction: float | None
    source: str
    fitted: tuple[str, ...] = field(default=())  # languages fitted beyond `langs`
    nullspaces: tuple[int, ...] = (0,)  # pivot-search m tried (NULLSPACES: needs `fitted`)


TRAININGS = {
    "e5-mr": Training(("mr",), E5, None, "frozen multilingual-e5-small (Wang et al. 2024)"),
    "e5-mr-whiten": Training(("mr",), WHITEN, None,
                             "+ per-language whitening (Su et al. 2021), fitted on Marathi"),
    "e5-mr-whiten-fit3": Training(("mr",), (*WHITEN, FIT_3), None,
                                  "+ whitening fitted on mr, hi, en captions (shared "
                                  "centering of three languages)", ("hi", "en")),
    "e5-mr-lir-whiten-fit3": Training(("mr",), (*WHITEN, FIT_3,
                                                "data.sentence_language_removal=1"), None,
                                      "+ language-identity removal, LIR r=1 (Yang et al. "
                                      "2021), then whitening, fitted on mr, hi, en",
                                      ("hi", "en"), NULLSPACES),
    "e5-mr-input8-lir-whiten-fit3": Training(
        ("mr",), (*WHITEN, FIT_3, "data.sentence_language_removal=1",
                  "data.sentence_input_nullspace=8"), None,
        "the model's input without the 8 top translation-difference directions "
        "(language-agnostic input; 8: the pivot search's m chosen on Marathi validation), "
        "then LIR r=1 and whitening, fitted on mr, hi, en", ("hi", "en")),
    "e5-mr+hi+en-whiten": Training(("mr", "hi", "en"), WHITEN, None,
                                   "trained on three source languages (mr, hi, en), "
                                   "whitened"),
    "e5-mr+tate10-whiten": Training(("mr", "ta", "te"), WHITEN, 0.10,
                                    "few-shot: ta/te captions of 10% of their videos, "
                                    "statistics from those only"),
    "e5-mr+tate25-whiten": Training(("mr", "ta", "te"), WHITEN, 0.25,
                                    "few-shot: ta/te captions of 25% of their videos, "
                                    "statistics from those only"),
}


def zero_shot_dataset(source: Path, out: Path) -> Path:
    """A copy of ``source`` whose training split has no Tamil or Telugu caption (nor a
    relation naming one); written once."""
    target = out / "no-tate"
    if (target / "rudder.json").is_file():
        return target
    with staged_folder(target) as staging:
        shutil.copytree(source, staging, dirs_exist_ok=True)
        drop_captions(staging, lambda table: pc.is_in(table.column("lang"),
                                                     pa.array(list(TARGETS))))
        swap_into_place(staging, target)
    return target


def few_shot_dataset(source: Path, out: Path, fraction: float, seed: int) -> Path:
    """A copy of ``source`` whose training split keeps the ta/te captions of ``fraction`` of
    the videos that have them (seeded); written once."""
    target = out / f"tate{round(100 * fraction)}-seed{seed}"
    if (target / "rudder.json").is_file():
        return target
    with staged_folder(target) as staging:
        shutil.copytree(source, staging, dirs_exist_ok=True)
        _keep_fraction(staging / "captions" / "train.parquet", fraction, seed)
        swap_into_place(staging, target)
    return target


def drop_captions(folder: Path, dropped) -> None:
    """Remove the training captions for which ``dropped(table)`` is true, and the relations
    that name them."""
    path = folder / "captions" / "train.parquet"
    table = pq.read_table(path)
    mask = dropped(table)
    gone = table.filter(mask).column("caption_id")
    pq.write_table(table.filter(pc.invert(mask)), path)
    relations = folder / "relations" / "all.parquet"
    if relations.is_file():
        rel = pq.read_table(relations)
        named = pc.or_(pc.is_in(rel.column("caption_id_a"), gone),
                       pc.is_in(rel.column("caption_id_b"), gone))
        pq.write_table(rel.filter(pc.invert(named)), relations)


def _keep_fraction(path: Path, fraction: float, seed: int) -> None:
    table = pq.read_table(path)
    langs = np.asarray(table.column("lang").to_pylist())
    videos = np.asarray(table.column("video_id").to_pylist())
    other = np.isin(langs, list(TARGETS))
    pool = sorted(set(videos[other].tolist()))
    rng = np.random.default_rng(seed)
    chosen = set(rng.permutation(pool)[: round(fraction * len(pool))].tolist())
    keep = ~other | np.isin(videos, sorted(chosen))
    pq.write_table(table.filter(keep), path)


def run(command: list[str]) -> None:
    print("$ " + " ".join(command), flush=True)
    subprocess.run(command, check=True)


def train(name: str, out: Path, dataset: Path, seed: int, epochs: int | None = None) -> Path:
    """Train row ``name`` with ``seed`` into ``out/runs`` (reused when finished); ``epochs``
    caps the epochs (default: rudder's, with early stopping)."""
    spec = TRAININGS[name]
    data = (zero_shot_dataset(dataset, out / "data") if spec.fraction is None
            else few_shot_dataset(dataset, out / "data", spec.fraction, seed))
    run_dir = out / "runs" / f"{name}-seed{seed}"
    if not metrics_file(run_dir).is_file():
        run([sys.executable, "-m", "rudder.train", "--dataset", str(data), "--seed", str(seed),
             "--output-dir", str(run_dir), "--overwrite", "--set",
             f"data.caption_langs=[{','.join(spec.langs)}]",
             *[arg for value in spec.settings for arg in ("--set", value)],
             *(["--epochs", str(epochs)] if epochs else [])])
    return run_dir


# ------------------------------------------------------------------------------ evaluation
def segment_pairs(captions: dict, lang: str, partner: str = SOURCE) -> dict[str, str]:
    """Caption id of ``lang`` -> the ``partner`` caption of the same segment (same video,
    start and end; the first when several), for the captions that have one."""
    rows = list(zip(captions["caption_id"], captions["video_id"], captions["lang"],
                    captions["start"], captions["end"], strict=True))
    first: dict[tuple, str] = {}
    for cid, video, g, start, end in rows:
        if g == partner:
            first.setdefault((video, start, end), cid)
    return {cid: first[(video, start, end)] for cid, video, g, start, end in rows
            if g == lang and (video, start, end) in first}


def language_hits(ranks: dict[str, float], langs_of: dict[str, str], pairs: dict,
                  k: int = K) -> dict:
    """Per language: R@k (percent) and its query count; for each language with pairs, the
    paired R@k of its queries and of their Marathi partners."""
    out: dict[str, dict] = {}
    for lang in sorted(set(langs_of.values())):
        ids = [cid for cid, g in langs_of.items() if g == lang]
        out[lang] = {"R10": 100 * float(np.mean([ranks[c] < k for c in ids])),
                     "queries": len(ids)}
        if pairs.get(lang):
            own = [ranks[c] < k for c in pairs[lang]]
            partner = [ranks[m] < k for m in pairs[lang].values()]
            out[lang] |= {"paired_R10": 100 * float(np.mean(own)),
                          "partner_R10": 100 * float(np.mean(partner)),
                          "pairs": len(own)}
    return out


def evaluate(run_dir: Path, split: str, pivots: int, pivot_langs=None,
             nullspace: int = 0, passages: bool = False) -> dict:
    """Per-language R@10 and paired R@10 of the run's ``split`` captions in :data:`LANGS`
    (ranked over all the split's videos; ``pivots``, ``pivot_langs``, ``nullspace`` and
    ``passages`` override ``data.sentence_pivots``, ``data.sentence_pivot_langs``,
    ``data.sentence_pivot_nullspace`` and ``data.sentence_pivot_passages``)."""
    from rudder.evaluation.evaluate import evaluate_runs
    from rudder.evaluation.loading import load_run

    run = load_run(run_dir)
    sentence = bool(run.config.data.text_encoder)
    _, sims, _, data = evaluate_runs([run_dir], split, langs=LANGS,
                                     pivots=pivots if sentence else None,
                                     pivot_langs=pivot_langs,
                                     pivot_nullspace=nullspace if sentence else None,
                                     pivot_passages=passages if sentence else None)
    return hits_of(run, split, sims.numpy(), data)


def hits_of(run, split: str, sims: np.ndarray, data) -> dict:
    """:func:`language_hits` of the t2v similarities ``sims`` of ``data`` (a loaded split
    of ``run``'s dataset)."""
    from rudder.evaluation.metrics import query_ranks

    ranks_flat = query_ranks(sims, data.caption_mask.numpy(), "t2v")
    valid = data.caption_mask.numpy().reshape(-1)
    ids = [cid for cid, ok in zip(np.asarray(data.caption_ids).reshape(-1), valid,
                                  strict=True) if ok]
    ranks = dict(zip(ids, ranks_flat[valid].tolist(), strict=True))
    captions = run.dataset.captions(split, columns=["caption_id", "video_id", "lang", "start",
                                                    "end"]).to_pydict()
    langs_of = {c: g for c, g in zip(captions["caption_id"], captions["lang"], strict=True)
                if c in ranks}
    pairs = {lang: {c: m for c, m in segment_pairs(captions, lang).items() if c in ranks}
             for lang in LANGS if lang != SOURCE}
    return language_hits(ranks, langs_of, pairs)


def evaluated(label: str, run_dir: Path, out: Path, split: str, pivots: int,
              pivot_langs=None, nullspace: int = 0, passages: bool = False) -> dict:
    """:func:`evaluate`, kept in ``DIR/evaluated`` (reused when there)."""
    path = out / "evaluated" / f"{label}-{split}.json"
    if path.is_file():
        return json.loads(path.read_text(encoding="utf-8"))
    print(f"evaluating {label} on {split}", flush=True)
    result = evaluate(run_dir, split, pivots, pivot_langs, nullspace, passages)
    path.parent.mkdir(parents=True, exist_ok=True)
    atomic_write_text(path, json.dumps(result, indent=1))
    return result


def oracle(run_dir: Path, fit_dir: Path, split: str = "test") -> dict:
    """A diagnostic, NOT zero-shot: :func:`evaluate` (no pivots) with every statistic of
    the target languages (:data:`TARGETS`: language removal, centering, whitening) fitted
    on those languages' own ``split`` captions, the queries themselves (transductive,
    through ``data.sentence_fit_text``, files written to ``fit_dir``). It bounds what
    better-fitted statistics could give the zero-shot path."""
    from rudder.data.loader import build_class_index, load_split
    from rudder.evaluation.inference import similarity_matrix
    from rudder.evaluation.loading import load_run

    run = load_run(run_dir)
    cfg = run.config.data
    if not (cfg.sentence_centering or cfg.sentence_whitening or cfg.sentence_language_removal):
        raise ValueError(f"{run_dir}: the oracle needs fitted statistics (a sentence "
                         "transform)")
    captions = run.dataset.captions(split, columns=["lang", "text"]).to_pydict()
    cfg.sentence_fit_text = {}
    for lang in TARGETS:
        path = atomic_write_text(
            fit_dir / f"{lang}-{split}.txt",
            "\n".join(t for t, g in zip(captions["text"], captions["lang"], strict=True)
                      if g == lang))
        cfg.sentence_fit_text[lang] = str(path)
    cfg.sentence_pivots = 0
    data = load_split(run.dataset, split, run.experts, run.vocab, LANGS,
                      build_class_index(run.dataset), cfg.max_words, cfg.max_frames,
                      run.text_encoder)
    sims = similarity_matrix(run.model, data, "cpu", cfg.max_words, cfg.max_frames)
    return hits_of(run, split, sims.numpy(), data)


def oracle_cached(run_dir: Path, out: Path) -> dict:
    path = out / "evaluated" / f"{run_dir.name}-oracle-test.json"
    if path.is_file():
        return json.loads(path.read_text(encoding="utf-8"))
    print(f"evaluating {run_dir.name}: transductive oracle statistics", flush=True)
    result = oracle(run_dir, out / "oracle-fit-text")
    path.parent.mkdir(parents=True, exist_ok=True)
    atomic_write_text(path, json.dumps(result, indent=1))
    return result


def pivot_proxy(run_dir: Path, ks=PIVOT_KS, nullspaces=(0,),
                passages: bool = False) -> dict[int, dict[int, float]]:
    """Marathi validation t2v R@10 when each query is answered through its k nearest
    training captions of the trained languages other than its own text (the zero-shot
    path's pivots, measured where the right answer is known without target-language
    data), per m of ``nullspaces`` (the pivot search after removing the m top
    translation-difference directions, ``data.sentence_pivot_nullspace``; 0: off) and k:
    ``{m: {k: R@10}}``; ``passages``: the captions searched encoded with the passage prompt
    (``data.sentence_pivot_passages``)."""
    import torch

    from rudder.data.loader import load_videos
    from rudder.evaluation.inference import embed_videos
    from rudder.evaluation.loading import load_run
    from rudder.evaluation.metrics import target_ranks
    from rudder.models import interface
    from rudder.text.encoders import _unit

    run = load_run(run_dir)
    data = run.config.data
    if data.text_encoder is None:
        raise ValueError(f"{run_dir}: the pivot proxy needs a run with a sentence encoder "
                         "(data.text_encoder)")
    data.sentence_pivot_nullspace = max(nullspaces)  # the top-m columns serve every smaller m
    model = interface(run.model)
    encoder = run.text_encoder
    captions = run.dataset.captions("validation", columns=["video_id", "lang", "text"])
    captions = captions.filter(pc.equal(captions.column("lang"), SOURCE)).to_pydict()
    videos = load_videos(run.dataset, "validation", run.experts, data.max_frames)
    video_emb = embed_videos(run.model, videos, "cpu", run.config.data.max_frames)
    queries = encoder.input_vectors(captions["text"])
    train = run.dataset.captions("train", columns=["text", "lang"]).to_pydict()
    pool_texts = [t for t, _ in dict.fromkeys(
        (t, g) for t, g in zip(train["text"], train["lang"], strict=True)
        if g in encoder.trained_langs)]
    raw_pool, pool = encoder._pivot_pool()  # as SentenceFeatures._pivoted
    if passages:
        raw_pool = encoder.input_vectors(encoder._pivot_texts(), passage=True)
    own = np.asarray(pool_texts, object)[None, :] == np.asarray(captions["text"], object)[:, None]
    column = {v: i for i, v in enumerate(videos.video_ids)}
    target = np.asarray([column[v] for v in captions["video_id"]])
    result: dict[int, dict[int, float]] = {}
    for m in nullspaces:
        scores = (encoder.pivot_search_vectors(queries, m)
                  @ encoder.pivot_search_vectors(raw_pool, m).T)
        scores[own] = -np.inf
        order = np.argsort(-scores, axis=1, kind="stable")
        result[m] = {}
        for k in ks:
            vectors = torch.from_numpy(_unit(pool[order[:, :k]].mean(axis=1)))
            with torch.no_grad():
                emb, logits = model.encode_text(vectors.unsqueeze(1),
                                                torch.ones(len(vectors), 1, dtype=torch.bool))
                sims = model.similarity(emb, logits, video_emb, videos.available).numpy()
            ranks = target_ranks(sims, target)
            result[m][k] = 100 * float(np.mean(ranks < K))
    return result


# ------------------------------------------------------------------------------ reporting
T_975 = {1: 12.706, 2: 4.303, 3: 3.182, 4: 2.776, 5: 2.571, 6: 2.447, 7: 2.365, 8: 2.306,
         9: 2.262}


def interval(values) -> tuple[float, float | None]:
    """Mean and the half-width of its 95% Student-t interval over ``values`` (None for one
    value: no spread to estimate)."""
    values = [v for v in values if v is not None and not math.isnan(v)]
    mean = float(np.mean(values))
    if len(values) < 2:
        return mean, None
    sem = float(np.std(values, ddof=1)) / math.sqrt(len(values))
    return mean, T_975.get(len(values) - 1, 1.96) * sem


def summarise(per_seed: list[dict]) -> dict:
    """Across seeds: per language, R@10, the overall ratio to Marathi and the paired ratio
    (each ratio computed per seed, then averaged)."""
    out = {}
    for lang in LANGS:
        if not all(lang in result for result in per_seed):
            continue
        r10 = [result[lang]["R10"] for result in per_seed]
        ratio = [result[lang]["R10"] / result[SOURCE]["R10"] if result[SOURCE]["R10"] else
                 math.nan for result in per_seed]
        cell = {"R10": interval(r10), "ratio": interval(ratio),
                "queries": per_seed[0][lang]["queries"]}
        if "paired_R10" in per_seed[0][lang]:
            paired = [result[lang]["paired_R10"] / result[lang]["partner_R10"]
                      if result[lang]["partner_R10"] else math.nan for result in per_seed]
            cell |= {"paired_ratio": interval(paired), "pairs": per_seed[0][lang]["pairs"]}
        out[lang] = cell
    return out


def text_used(name: str) -> set[str]:
    """The languages whose text a training row read (trained on or fitted)."""
    spec = TRAININGS[name]
    return set(spec.langs) | set(spec.fitted)


@dataclass
class Row:
    label: str
    training: str
    pivots: int
    test: dict
    validation: dict
    seeds: list[int] = field(default_factory=list)
    via: tuple[str, ...] = ()  # the pivots' search languages (default: the trained ones)
    nullspace: int = 0  # data.sentence_pivot_nullspace of the pivot search
    proxy_choice: bool = False  # the (m, k) pivot_proxy chose for this training
    passages: bool = False  # data.sentence_pivot_passages of the pivot search


def choose(rows: list[Row]) -> Row | None:
    """The zero-shot path of a model trained on Marathi only (its pivots' k and m as
    :func:`pivot_proxy` chose them on Marathi validation, searched among the trained
    language's captions: the pivots through another language cannot be compared on
    Marathi data), with the best mean Marathi validation R@10 (ties: the earlier row)."""
    candidates = [row for row in rows if TRAININGS[row.training].langs == (SOURCE,)
                  and TRAININGS[row.training].fraction is None and row.proxy_choice]
    if not candidates:
        return None
    return max(candidates, key=lambda row: (row.validation[SOURCE]["R10"][0],
                                            -candidates.index(row)))


def fmt(pair, digits: int = 1) -> str:
    """'80.9 ± 1.6', or '80.9 ± n/a' for one seed."""
    mean, half = pair
    return f"{mean:.{digits}f} ± " + ("n/a" if half is None else f"{half:.{digits}f}")


def report(rows: list[Row], header: dict, chosen: Row | None, proxies: dict,
           oracles: dict | None = None) -> str:
    """The Markdown report: header, test table (R@10, ratios), validation Marathi column,
    the pivot choice, the transductive oracle diagnostic (``oracles``: training -> its
    :func:`oracle` summarised over seeds), and the chosen row's check against 0.5x."""
    lines = [f"# Cross-lingual transfer on the {header['dataset_note']}", "",
             (f"Command: `{header['command']}`; commit {header['commit']}; dataset "
              f"{header['dataset']} (fingerprint {header['fingerprint']}, zero-shot copy "
              f"{header['zero_shot_fingerprint']}); seeds {header['seeds']}; machine: "
              f"{header['machine']}."), "",
             (f"Test t2v R@10 over all {header['test_videos']} test videos "
              "(mean ± 95% t-interval over seeds). Each language cell: R@10, then its ratio "
              "to Marathi overall / paired on the same segments. **ZS** marks a language "
              "whose text the row used nowhere (training or any fitted statistic): true "
              "zero-shot. `*` marks a training language; `fit` a language whose captions "
              "fitted statistics only; `piv` one whose training captions were the pivots; "
              "`few` a few-shot language."), "",
             ("Queries per language (test): "
              + ", ".join(f"{lang} {header['queries'][lang]}" for lang in LANGS)
              + "; pairs with a Marathi caption of the same segment: "
              + ", ".join(f"{lang} {header['pairs'][lang]}" for lang in LANGS
                          if lang != SOURCE) + "."),
             "", "| setting | pivots | seeds | source | " + " | ".join(
                 f"{lang} R@10 (× mr; paired)" for lang in LANGS) + " | mr val R@10 |",
             "|---" * (len(LANGS) + 5) + "|"]
    for row in rows:
        spec = TRAININGS[row.training]
        cells = []
        for lang in LANGS:
            cell = row.test.get(lang)
            if cell is None:
                cells.append("-")
                continue
            mark = ("*" if lang in spec.langs and not (spec.fraction and lang in TARGETS)
                    else "few" if spec.fraction and lang in TARGETS
                    else "fit" if lang in spec.fitted
                    else "piv" if lang in row.via else "ZS")
            text = f"{fmt(cell['R10'])} {mark}"
            if lang != SOURCE:
                text += f" (×{fmt(cell['ratio'], 2)}"
                text += f"; ×{fmt(cell['paired_ratio'], 2)})" if "paired_ratio" in cell else ")"
            cells.append(text)
        pick = " **(chosen)**" if row is chosen else ""
        seeds = ", ".join(map(str, row.seeds)) or "-"
        pivots = f"{row.pivots} via {'+'.join(row.via)}" if row.via else str(row.pivots)
        if row.nullspace:
            pivots += f", null {row.nullspace}"
        if row.passages:
            pivots += ", passages"
        lines.append(f"| {row.training}{pick} | {pivots} | {seeds} | {spec.source} | "
                     + " | ".join(cells) + f" | {fmt(row.validation[SOURCE]['R10'])} |")
    lines += ["", ("`null m` (`data.sentence_pivot_nullspace=m`): the pivots are searched "
                   "after removing the m top directions of translation differences, the "
                   "uncentred SVD of the mE5 vectors of hi-minus-mr and en-minus-mr training "
                   "captions of the same segments (the fitting languages' text only; hard "
                   "debiasing's subspace, Bolukbasi et al. 2016, with translation pairs; cf. "
                   "Xie et al., EMNLP 2022, LSAR); the model's input is unchanged."),
              "", "Pivots of the zero-shot path chosen on Marathi validation "
              "(`pivot_proxy`: Marathi validation queries answered through their k nearest "
              "other training captions, searched after removing m directions; mean R@10 "
              "over seeds; ties: smaller m, then smaller k): " + "; ".join(
                  f"{name}: " + ", ".join(
                      (f"m={m} " if any(mk[0] for mk in values) else "") + f"k={k} {v:.1f}"
                      for (m, k), v in sorted(values.items()))
                  for name, values in proxies.items()) + "."]
    lines[-1] += "".join(
        f" With the pool searched as passages (`passages`: the mE5 \"passage: \" prompt on "
        f"the training captions searched, \"query: \" on the query; the model card's "
        f"asymmetric use) at {name}'s m={m}, k={k}: {value:.1f}."
        for name, (m, k, value) in header.get("passage_proxies", {}).items())
    for name, cells in (oracles or {}).items():
        lines += ["", (f"Diagnostic, **not zero-shot** (no row above): `{name}` without pivots, "
                       "every statistic of ta and te (language removal, centering, whitening) "
                       "fitted transductively on their own test captions, the queries "
                       "themselves (`oracle`): " + "; ".join(
                           f"{lang} {fmt(cells[lang]['R10'])} (×{fmt(cells[lang]['ratio'], 2)}; "
                           f"×{fmt(cells[lang]['paired_ratio'], 2)} paired)"
                           for lang in TARGETS if lang in cells)
                       + "." + (" Even statistics fitted on the test queries stay below "
                                "0.5×: the fitted statistics are not what holds these "
                                "languages back; the encoder's cross-lingual alignment of "
                                "them is." if all(cells[lang]["ratio"][0] < 0.5
                                                  for lang in TARGETS if lang in cells)
                                else ""))]
    if chosen is not None:
        verdict = []
        for lang in TARGETS:
            cell = chosen.test[lang]
            verdict.append(f"{lang} ×{cell['ratio'][0]:.2f} overall, "
                           f"×{cell['paired_ratio'][0]:.2f} paired")
        met = all(chosen.test[lang]["ratio"][0] >= 0.5 and chosen.test[lang]["paired_ratio"][0]
                  >= 0.5 for lang in TARGETS)
        via = f" found through {'+'.join(chosen.via)} captions" if chosen.via else ""
        via += (f", searched after removing {chosen.nullspace} translation-difference "
                "directions" if chosen.nullspace else "")
        via += ", the captions searched encoded as passages" if chosen.passages else ""
        lines += ["", (f"Chosen on Marathi validation only: `{chosen.training}` with "
                       f"{chosen.pivots} pivots{via}. True zero-shot target (ta and te ≥ 0.5 × mr, "
                       f"overall and paired, mean over seeds): {'met' if met else 'missed'} "
                       f"({'; '.join(verdict)}).")]
    return "\n".join(lines) + "\n"


def git_commit() -> str:
    try:
        return subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True,
                              text=True, check=True).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        return "unknown"


def machine() -> str:
    import os

    from rudder.runs.folders import cpu_model

    load = ", ".join(f"{v:.1f}" for v in os.getloadavg())
    return f"{cpu_model()}, {os.cpu_count()} CPUs, load {load}"


def finished_runs(name: str, out: Path, seeds) -> list[Path]:
    """The runs of training ``name`` under ``out`` whose test metrics are written."""
    runs = [out / "runs" / f"{name}-seed{seed}" for seed in seeds]
    return [run for run in runs if metrics_file(run).is_file()]


def study(out: Path, dataset_spec: str, seeds, names, command: str,
          train_missing: bool = True, epochs: int | None = None
          ) -> tuple[list[Row], dict, Row | None, dict, dict]:
    """Train and evaluate every row (resuming; with ``train_missing=False`` only the runs
    already finished are used, and each row says its seeds); returns the rows, the header,
    the chosen row, the pivot proxies (training -> {(m, k): mean R@10}) and the oracle
    diagnostics (training -> summary; the trainings that try a nullspace). Marathi
    validation R@10 does not depend on the pivots (Marathi is trained on), so each run is
    evaluated on validation once."""
    dataset = resolve_dataset(dataset_spec)
    source = dataset.root
    rows: list[Row] = []
    proxies: dict[str, dict[tuple[int, int], float]] = {}
    passage_proxies: dict[str, tuple[int, int, float]] = {}  # (m, k, mean R@10)
    oracles: dict[str, dict] = {}
    for name in names:
        if train_missing:
            for seed in seeds:
                train(name, out, source, seed, epochs)
        runs = finished_runs(name, out, seeds)
        if not runs:
            continue
        # (pivots, via, nullspace, passages, chosen by the proxy)
        pivot_options: list[tuple[int, tuple[str, ...], int, bool, bool]] = [
            (0, (), 0, False, False)]
        if TRAININGS[name].fraction is None:
            spaces = TRAININGS[name].nullspaces
            per_run = [{m: pivot_proxy_cached(run_dir, out, m) for m in spaces}
                       for run_dir in runs]
            proxies[name] = {(m, k): float(np.mean([p[m][k] for p in per_run]))
                             for m in spaces for k in PIVOT_KS}
            # ties: fewer directions removed, then fewer pivots
            best_m, best_k = max(proxies[name], key=lambda mk: (proxies[name][mk], -mk[0],
                                                                -mk[1]))
            plain_k = max(PIVOT_KS, key=lambda k: (proxies[name][(0, k)], -k))
            # the passage prompt on the pool side, tried at the chosen (m, k) where m is
            # tried; chosen when the proxy prefers it
            passages = False
            if len(spaces) > 1:
                passage = float(np.mean([pivot_proxy_cached(run_dir, out, best_m, True)[best_k]
                                         for run_dir in runs]))
                passage_proxies[name] = (best_m, best_k, passage)
                passages = passage > proxies[name][(best_m, best_k)]
            pivot_options.append((plain_k, (), 0, False, best_m == 0 and not passages))
            if best_m:
                pivot_options.append((best_k, (), best_m, False, not passages))
            elif len(spaces) > 1:  # the best m > 0, shown beside the choice
                m, k = max((mk for mk in proxies[name] if mk[0]),
                           key=lambda mk: (proxies[name][mk], -mk[0], -mk[1]))
                pivot_options.append((k, (), m, False, False))
            if name in passage_proxies:
                pivot_options.append((best_k, (), best_m, True, passages))
            if PIVOT_HUB not in TRAININGS[name].langs:
                pivot_options.append((plain_k, (PIVOT_HUB,), 0, False, False))
        validation = summarise([evaluated(f"{run_dir.name}-pivots0", run_dir, out,
                                          "validation", 0) for run_dir in runs])
        for pivots, via, nullspace, passage_side, by_proxy in pivot_options:
            suffix = ((f"-via-{'+'.join(via)}" if via else "")
                      + (f"-null{nullspace}" if nullspace else "")
                      + ("-passages" if passage_side else ""))
            test = summarise([evaluated(f"{run_dir.name}-pivots{pivots}{suffix}", run_dir, out,
                                        "test", pivots, list(via) or None, nullspace,
                                        passage_side) for run_dir in runs])
            rows.append(Row(name, name, pivots, test, validation,
                            [int(run.name.rsplit("seed", 1)[1]) for run in runs], via,
                            nullspace, by_proxy, passage_side))
        if TRAININGS[name].nullspaces != (0,):
            oracles[name] = summarise([oracle_cached(run_dir, out) for run_dir in runs])
    zero = resolve_dataset(str(zero_shot_dataset(source, out / "data")))
    test = dataset.captions("test", columns=["caption_id", "video_id", "lang", "start",
                                             "end"]).to_pydict()
    header = {
        "command": command, "commit": git_commit(), "dataset": dataset_spec,
        "dataset_note": ("embedded sample (simulated data)" if dataset.meta.simulated
                         else str(dataset_spec)),
        "fingerprint": dataset.fingerprint(), "zero_shot_fingerprint": zero.fingerprint(),
        "seeds": ", ".join(map(str, seeds)), "machine": machine(),
        "test_videos": len(set(test["video_id"])),
        "queries": {lang: test["lang"].count(lang) for lang in LANGS},
        "pairs": {lang: len(segment_pairs(test, lang)) for lang in LANGS if lang != SOURCE},
    }
    header["passage_proxies"] = passage_proxies
    return rows, header, choose(rows), proxies, oracles


def pivot_proxy_cached(run_dir: Path, out: Path, nullspace: int = 0,
                       passages: bool = False) -> dict[int, float]:
    """:func:`pivot_proxy` at one m, per k, kept in ``DIR/evaluated``."""
    suffix = (f"-null{nullspace}" if nullspace else "") + ("-passages" if passages else "")
    path = out / "evaluated" / f"{run_dir.name}-pivot-proxy{suffix}.json"
    if path.is_file():
        return {int(k): v for k, v in json.loads(path.read_text(encoding="utf-8")).items()}
    result = pivot_proxy(run_dir, nullspaces=(nullspace,), passages=passages)[nullspace]
    path.parent.mkdir(parents=True, exist_ok=True)
    atomic_write_text(path, json.dumps(result))
    return result


# Hand-written Bengali (bn) and Kannada (kn) translations of English test captions of the
# sample (video id, English caption): languages the sample has no caption in.
UNSEEN = [
    ("bn", "v0000", "Next, paint the paper cup.", "এরপর কাগজের কাপটি রং করুন।"),
    ("bn", "v0000", "Pierce the paper cup with the nail.", "পেরেক দিয়ে কাগজের কাপটি ফুটো করুন।"),
    ("bn", "v0019", "Next, tie the thread to the paper.", "এরপর কাগজে সুতো বাঁধুন।"),
    ("bn", "v0029", "Insert the wire into the straw.", "স্ট্রের মধ্যে তারটি ঢোকান।"),
    ("kn", "v0000", "Next, paint the paper cup.", "ನಂತರ ಕಾಗದದ ಕಪ್‌ಗೆ ಬಣ್ಣ ಹಚ್ಚಿ."),
    ("kn", "v0020", "Next, cut the paper with the scissors.",
     "ನಂತರ ಕತ್ತರಿಯಿಂದ ಕಾಗದವನ್ನು ಕತ್ತರಿಸಿ."),
    ("kn", "v0029", "Cut the straw with the scissors.", "ಕತ್ತರಿಯಿಂದ ಸ್ಟ್ರಾವನ್ನು ಕತ್ತರಿಸಿ."),
    ("kn", "v0029", "Insert the wire into the straw.", "ಸ್ಟ್ರಾದೊಳಗೆ ತಂತಿಯನ್ನು ತೂರಿಸಿ."),
]


def illustrate(run_dir: Path, pivots: int | None = None, rounds: int | None = None) -> str:
    """Markdown: the rank of the right test video (of all test videos, 1 is best; ties
    averaged) for each
    hand-written Bengali/Kannada query, beside its English source caption and the Marathi
    caption of the same segment. ``pivots`` / ``rounds`` override the run's
    ``data.sentence_pivots`` / ``data.sentence_alignment``."""
    import torch

    from rudder.data.loader import load_videos
    from rudder.evaluation.inference import embed_videos
    from rudder.evaluation.loading import load_run
    from rudder.models import interface

    run = load_run(run_dir)
    model = interface(run.model)
    if pivots is not None:
        run.config.data.sentence_pivots = pivots
    if rounds is not None:
        run.config.data.sentence_alignment = rounds
    videos = load_videos(run.dataset, "test", run.experts, run.config.data.max_frames)
    video_emb = embed_videos(run.model, videos, "cpu", run.config.data.max_frames)
    captions = run.dataset.captions("test", columns=["video_id", "lang", "text", "start",
                                                     "end"]).to_pylist()
    rows = ["| query (lang) | rank | English source (rank) | Marathi, same segment (rank) |",
            "|---|---|---|---|"]
    for lang, video, english, text in UNSEEN:
        source = next(c for c in captions if c["video_id"] == video and c["text"] == english)
        marathi = next(c["text"] for c in captions if c["video_id"] == video and c["lang"] ==
                       "mr" and (c["start"], c["end"]) == (source["start"], source["end"]))
        with torch.no_grad():
            inputs, mask = run.encode_queries([text, english, marathi], [lang, "en", "mr"])
            emb, logits = model.encode_text(inputs, mask)
            sims = model.similarity(emb, logits, video_emb, videos.available)
        target = videos.video_ids.index(video)
        # tie-averaged ranks, as rudder.evaluation.metrics
        ranks = [float((row > row[target]).sum() + ((row == row[target]).sum() + 1) / 2)
                 for row in sims]
        rows.append(f"| {text} ({lang}) | {ranks[0]:g} | {english} ({ranks[1]:g}) | {marathi} "
                    f"({ranks[2]:g}) |")
    return "\n".join(rows)


def main(argv: list[str] | None = None) -> dict:
    parser = argparse.ArgumentParser(prog="python -m experiments.transfer",
                                     description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", type=Path, default=Path("runs/transfer"))
    parser.add_argument("--dataset", default="sample")
    parser.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    parser.add_argument("--only", nargs="+", choices=sorted(TRAININGS), help="these rows only")
    parser.add_argument("--report", type=Path, help="also write the Markdown report here")
    parser.add_argument("--no-training", action="store_true",
                        help="report the runs already finished under --out; train nothing")
    parser.add_argument("--epochs", type=int, help="cap each training's epochs (a smoke test)")
    parser.add_argument("--illustrate", type=Path, metavar="RUN",
                        help="only rank the hand-written Bengali and Kannada queries with RUN")
    parser.add_argument("--sentence-pivots", type=int, help="with --illustrate: override")
    parser.add_argument("--sentence-alignment", type=int, help="with --illustrate: override")
    args = parser.parse_args(argv)
    if args.illustrate:
        print(illustrate(args.illustrate, args.sentence_pivots, args.sentence_alignment))
        return {}
    command = "python -m experiments.transfer " + " ".join(argv if argv is not None
                                                            else sys.argv[1:])
    rows, header, chosen, proxies, oracles = study(args.out, args.dataset, args.seeds,
                                          args.only or list(TRAININGS), command.strip(),
                                          train_missing=not args.no_training,
                                          epochs=args.epochs)
    text = report(rows, header, chosen, proxies, oracles)
    args.out.mkdir(parents=True, exist_ok=True)
    atomic_write_text(args.out / "transfer.md", text)
    if args.report:
        atomic_write_text(args.report, text)
    print(text)
    return {"rows": rows, "header": header, "chosen": chosen, "proxies": proxies,
            "oracles": oracles}


if __name__ == "__main__":
    main()
