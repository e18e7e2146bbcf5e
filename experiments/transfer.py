"""Zero- and few-shot language transfer on a dataset (default: the embedded sample).

``python -m experiments.transfer [--out DIR] [--only NAME ...] [--seed S]`` trains CE on
Marathi captions only with each text side below, then Marathi plus a fraction of the Tamil
and Telugu training captions (the few-shot curve), and evaluates every run on the validation
and test splits with ``rudder.evaluate --query-langs mr hi ta te en``. It prints and writes
``DIR/transfer.md`` / ``transfer.json``: per run and split (the ``-pivotsK`` rows evaluate a
Marathi-only run with ``--sentence-pivots K``, the ``-alignN`` rows with
``--sentence-alignment N``), t2v R@10 per query language and
the ratio of the Tamil and Telugu R@10 to the Marathi one. Choose between text sides on the
validation rows; the test rows are the report. Finished runs (with their evaluations) are
reused, so the command resumes after a kill.

The few-shot datasets are copies of the dataset whose training split keeps the Tamil and
Telugu captions of a seeded random ``fraction`` of the videos that have them (validation and
test untouched), written under ``DIR/data/``.

Every command run is printed, so each row can be reproduced by hand.
"""

from __future__ import annotations

import argparse
import json
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pyarrow.parquet as pq

from rudder.atomic import staged_folder, swap_into_place
from rudder.runs.folders import resolve_dataset
from rudder.runs.layout import metrics_file, read_metrics

LANGS = ["mr", "hi", "ta", "te", "en"]
E5 = ["--set", "data.text_encoder=multilingual-e5"]
CENTER = ["--set", "data.sentence_centering=true"]
WHITEN = ["--set", "data.sentence_whitening=true"]
# training run -> (training caption languages, fraction of ta/te training captions, settings)
RUNS = {
    "embeddings-mr": (["mr"], None, []),
    "e5-mr": (["mr"], None, E5),
    "e5-mr-center": (["mr"], None, E5 + CENTER),
    "e5-mr-whiten": (["mr"], None, E5 + WHITEN),
    "e5-mr+tate10-center": (["mr", "ta", "te"], 0.10, E5 + CENTER),
    "e5-mr+tate25-center": (["mr", "ta", "te"], 0.25, E5 + CENTER),
    "e5-mr+tate100-center": (["mr", "ta", "te"], 1.0, E5 + CENTER),
    "e5-mr+tate10-whiten": (["mr", "ta", "te"], 0.10, E5 + WHITEN),
    "e5-mr+tate25-whiten": (["mr", "ta", "te"], 0.25, E5 + WHITEN),
    "e5-mr+tate100-whiten": (["mr", "ta", "te"], 1.0, E5 + WHITEN),
    "embeddings-mr+tate100": (["mr", "ta", "te"], 1.0, []),
}
# Pivots and alignment are query-time settings (evaluate --sentence-pivots K,
# --sentence-alignment N): evaluated on these runs.
PIVOT_RUNS, PIVOT_KS = ("e5-mr", "e5-mr-center", "e5-mr-whiten"), (1, 5, 20)
ALIGN_RUNS, ALIGN_ROUNDS = ("e5-mr", "e5-mr-center", "e5-mr-whiten"), (5, 10)


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


def _keep_fraction(path: Path, fraction: float, seed: int) -> None:
    table = pq.read_table(path)
    langs = np.asarray(table.column("lang").to_pylist())
    videos = np.asarray(table.column("video_id").to_pylist())
    other = np.isin(langs, ["ta", "te"])
    pool = sorted(set(videos[other].tolist()))
    rng = np.random.default_rng(seed)
    chosen = set(rng.permutation(pool)[: round(fraction * len(pool))].tolist())
    keep = ~other | np.isin(videos, sorted(chosen))
    pq.write_table(table.filter(keep), path)


def run(command: list[str]) -> None:
    print("$ " + " ".join(command), flush=True)
    subprocess.run(command, check=True)


def train(name: str, out: Path, dataset: Path, seed: int) -> Path:
    langs, fraction, extra = RUNS[name]
    data = dataset if fraction is None else few_shot_dataset(dataset, out / "data", fraction, seed)
    run_dir = out / "runs" / name
    if not metrics_file(run_dir).is_file():
        run([sys.executable, "-m", "rudder.train", "--dataset", str(data), "--seed", str(seed),
             "--output-dir", str(run_dir), "--overwrite", "--set",
             f"data.caption_langs=[{','.join(langs)}]", *extra])
    return run_dir


def evaluate(label: str, run_dir: Path, out: Path, dataset: Path, pivots: int = 0,
             rounds: int = 0) -> dict:
    """Per-language metrics of ``run_dir`` on validation and test (original dataset)."""
    result = {}
    for split in ("validation", "test"):
        evaluation = out / "evaluated" / f"{label}-{split}"
        if not metrics_file(evaluation).is_file():
            run([sys.executable, "-m", "rudder.evaluate", str(run_dir), "--split", split,
                 "--dataset", str(dataset), "--query-langs", *LANGS, "--output",
                 str(evaluation), *(["--sentence-pivots", str(pivots)] if pivots else []),
                 *(["--sentence-alignment", str(rounds)] if rounds else [])])
        result[split] = read_metrics(evaluation)["per_language"]
    return result


def table(results: dict) -> str:
    """Markdown: one row per run and split, R@10 per query language, ta/te ratios to mr."""
    lines = ["| run | split | " + " | ".join(f"{lang} R@10" for lang in LANGS)
             + " | ta/mr | te/mr |", "|---" * (len(LANGS) + 4) + "|"]
    for split in ("validation", "test"):
        for name, result in results.items():
            per = result[split]
            cells = [f"{per[lang]['R10']:.1f}" for lang in LANGS]
            ratios = [f"{per[lang]['R10'] / per['mr']['R10']:.2f}" for lang in ("ta", "te")]
            lines.append(f"| {name} | {split} | " + " | ".join(cells + ratios) + " |")
    return "\n".join(lines)


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
    from rudder.runs.folders import encode_queries, load_run

    run = load_run(run_dir)
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
            inputs, mask = encode_queries(run, [text, english, marathi], [lang, "en", "mr"])
            emb, logits = run.model.encode_text(inputs, mask)
            sims = run.model.similarity(emb, logits, video_emb, videos.available)
        target = videos.video_ids.index(video)
        # tie-averaged ranks, as rudder.evaluation.metrics
        ranks = [float((row > row[target]).sum() + ((row == row[target]).sum() + 1) / 2)
                 for row in sims]
        rows.append(f"| {text} ({lang}) | {ranks[0]:g} | {english} ({ranks[1]:g}) | {marathi} "
                    f"({ranks[2]:g}) |")
    return "\n".join(rows)


def main(argv: list[str] | None = None) -> dict:
    parser = argparse.ArgumentParser(prog="python -m experiments.transfer", description=__doc__
                                     .split("\n\n")[0])
    parser.add_argument("--out", type=Path, default=Path("runs/transfer"))
    parser.add_argument("--dataset", default="sample")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--only", nargs="+", choices=sorted(RUNS), help="these runs only")
    parser.add_argument("--illustrate", type=Path, metavar="RUN",
                        help="only rank the hand-written Bengali and Kannada queries with RUN")
    parser.add_argument("--sentence-pivots", type=int, help="with --illustrate: override")
    parser.add_argument("--sentence-alignment", type=int, help="with --illustrate: override")
    args = parser.parse_args(argv)
    if args.illustrate:
        print(illustrate(args.illustrate, args.sentence_pivots, args.sentence_alignment))
        return {}
    dataset = resolve_dataset(args.dataset).root
    results = {}
    for name in args.only or RUNS:
        run_dir = train(name, args.out, dataset, args.seed)
        results[name] = evaluate(name, run_dir, args.out, dataset)
        if name in PIVOT_RUNS:
            for k in PIVOT_KS:
                label = f"{name}-pivots{k}"
                results[label] = evaluate(label, run_dir, args.out, dataset, k)
        if name in ALIGN_RUNS:
            for n in ALIGN_ROUNDS:
                label = f"{name}-align{n}"
                results[label] = evaluate(label, run_dir, args.out, dataset, rounds=n)
    text = table(results)
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "transfer.md").write_text(text + "\n", encoding="utf-8")
    (args.out / "transfer.json").write_text(json.dumps(results, indent=1), encoding="utf-8")
    print(text)
    return results


if __name__ == "__main__":
    main()
