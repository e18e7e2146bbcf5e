"""``python -m rudder.evaluate``: evaluate checkpoints on a split, alone or fused.

``rudder.evaluate A B`` evaluates each run on its own. ``--fuse A B`` (alias
``--ensemble``) sums the similarity matrices of the runs; ``--fusion avg|max|hybrid`` fuses
their rankings instead (Galanopoulos & Mezaris 2021; both:
:func:`rudder.evaluation.fusion.fuse_directions`).
Metrics and predictions are printed and written to ``--output`` (default: the run's
``evaluations/<split>-single/``, or the first fused run's ``evaluations/<split>-fusion-<method>/``,
so fusions never overwrite each other; with several single runs, ``--output`` gets one
sub-folder per run).
"""

from __future__ import annotations

import argparse
from pathlib import Path

import torch

from rudder.cli import ArgumentParser, folder, int_in
from rudder.data.loader import build_class_index, load_split
from rudder.devices import pick_device
from rudder.errors import RunError, exit_on_error
from rudder.evaluation import fusion
from rudder.evaluation.inference import similarity_matrix, split_metrics
from rudder.evaluation.loading import load_run
from rudder.evaluation.predictions import write_predictions
from rudder.evaluation.query_langs import (
    check_pivots,
    check_query_langs,
    check_split_has,
    text_langs,
    training_langs,
    transfer_table,
)
from rudder.evaluation.results_table import results_table
from rudder.hub import published_models
from rudder.runs.layout import (
    evaluation_dir,
    evaluation_predictions_file,
    write_metrics,
)


def build_parser() -> argparse.ArgumentParser:
    parser = ArgumentParser(
        prog="python -m rudder.evaluate",
        description="Evaluate trained runs (checkpoints) on a dataset split.",
    )
    parser.add_argument("runs", nargs="*",
                        help="run directories, checkpoint files, published model folders or "
                        "Hub models hf://USER/NAME[@REV], each evaluated alone")
    parser.add_argument("--fuse", "--ensemble", dest="fuse", nargs="+", default=[],
                        metavar="RUN",
                        help="runs fused into one model "
                        "(see --fusion; --ensemble: the old spelling)")
    parser.add_argument("--fusion", choices=fusion.FUSIONS,
                        help="how --fuse runs are fused (default: sum of similarities)")
    parser.add_argument("--hybrid-q", type=int_in(1, 1000), default=2,
                        help="Q' of Hybrid rank fusion (1 <= Q' <= the number of --fuse runs)")
    parser.add_argument("--split", default="test", choices=["train", "validation", "test"])
    parser.add_argument("--dataset", help="dataset to evaluate on (default: the run's own)")
    parser.add_argument("--device", default="auto", choices=["auto", "cpu", "cuda"])
    parser.add_argument("--output", type=folder, help="folder for the metrics and predictions "
                        "(several single runs: one sub-folder per run)")
    parser.add_argument("--query-langs", nargs="+", metavar="LANG",
                        help="also rank the split's captions of each of these languages as "
                        "queries, trained on or not (metrics.json: per_language; printed: a "
                        "query-language x training-language table)")
    parser.add_argument("--sentence-pivots", type=int_in(0, 1000), metavar="K",
                        help="answer queries in languages the run was not trained on through "
                        "their K nearest training captions (overrides the run's "
                        "data.sentence_pivots; sentence encoders only; 0: off)")
    parser.add_argument("--sentence-alignment", type=int_in(0, 1000), metavar="N",
                        help="rotate queries in languages the run was not trained on onto the "
                        "trained ones (N rounds of self-learning Procrustes on unpaired "
                        "training captions; overrides data.sentence_alignment; 0: off)")
    parser.add_argument("--sentence-pivot-nullspace", type=int_in(0, 1000), metavar="M",
                        help="search the pivots after removing the M top directions of "
                        "translation differences (overrides data.sentence_pivot_nullspace; "
                        "0: off)")
    return parser


def evaluate_runs(paths, split="test", dataset=None, device="cpu", how="sum", hybrid_q=2,
                  langs=None, pivots=None, alignment=None, pivot_langs=None,
                  pivot_nullspace=None, pivot_passages=None):
    """Metrics of one run or the fusion of runs on ``split`` (its captions in ``langs``,
    default: the runs' training caption languages); ``pivots`` and ``alignment`` override
    the runs' ``data.sentence_pivots`` and ``data.sentence_alignment``, ``pivot_langs``
    their ``data.sentence_pivot_langs``, ``pivot_nullspace`` and ``pivot_passages`` their
    ``data.sentence_pivot_nullspace`` and ``data.sentence_pivot_passages`` (query-time
    settings, set before each run's text encoder is loaded).

    Returns ``(metrics, sims, sims_v2t, data)``; ``sims_v2t`` is None except under rank
    fusion, which ranks each direction separately.
    """
    loaded = [load_run(p, device=device, dataset=dataset) for p in paths]
    first = loaded[0]
    for other in loaded[1:]:
        if (other.experts != first.experts
                or other.config.data.caption_langs != first.config.data.caption_langs):
            raise RunError(f"{other.run_dir} uses other experts or caption languages than "
                           f"{first.run_dir}")
    class_index = build_class_index(first.dataset)
    matrices = []
    for run in loaded:
        cfg = run.config.data
        if pivots is not None:
            cfg.sentence_pivots = check_pivots(pivots, cfg.text_encoder, "--sentence-pivots")
        if alignment is not None:
            cfg.sentence_alignment = check_pivots(alignment, cfg.text_encoder,
                                                  "--sentence-alignment")
        if pivot_langs is not None:
            cfg.sentence_pivot_langs = list(pivot_langs)
        if pivot_nullspace is not None:
            cfg.sentence_pivot_nullspace = check_pivots(pivot_nullspace, cfg.text_encoder,
                                                        "--sentence-pivot-nullspace")
        if pivot_passages is not None:
            cfg.sentence_pivot_passages = bool(pivot_passages)
        data = load_split(run.dataset, split, run.experts, run.vocab, langs or cfg.caption_langs,
                          class_index, cfg.max_words, cfg.max_frames, run.text_encoder)
        matrices.append(similarity_matrix(run.model, data, device, cfg.max_words,
                                          cfg.max_frames))
    sims, sims_v2t = matrices[0], None
    if len(matrices) > 1:
        q = hybrid_q if how == "hybrid" else None
        t2v, v2t = fusion.fuse_directions([m.numpy() for m in matrices], data.caption_mask, how, q)
        sims = torch.as_tensor(t2v, dtype=torch.float32)
        sims_v2t = None if v2t is None else torch.as_tensor(v2t, dtype=torch.float32)
    return split_metrics(sims, data, first.config.supervision.rho, sims_v2t), sims, sims_v2t, data


def main(argv: list[str] | None = None) -> dict:
    """Evaluate; returns the summary written to metrics.json, or ``{run: summary}`` when
    several runs are evaluated one by one."""
    args = build_parser().parse_args(argv)
    if bool(args.runs) == bool(args.fuse):
        build_parser().error(
            "give run directories to evaluate each alone, or --fuse RUN RUN ... to fuse runs")
    if args.fusion and not args.fuse:
        build_parser().error("--fusion fuses the runs of --fuse")
    if args.fuse and len(args.fuse) < 2:
        build_parser().error("--fuse needs at least two runs")
    if args.fusion == "hybrid" and args.hybrid_q > len(args.fuse):
        build_parser().error(f"argument --hybrid-q: {args.hybrid_q} is more than the "
                             f"{len(args.fuse)} --fuse runs; use 1 <= Q' <= {len(args.fuse)}")
    with exit_on_error():
        if args.query_langs is not None:  # before any work
            args.query_langs = check_query_langs(args.query_langs)
            for path in args.fuse[:1] or args.runs:
                check_split_has(path, args.query_langs, args.split, args.dataset)
        device = str(pick_device(args.device))
        if args.fuse:
            how = args.fusion or "sum"
            name = f"fusion-{how}" + (f"{args.hybrid_q}" if how == "hybrid" else "")
            out = args.output or _default_output(args.fuse[0], args.split, name)
            return _evaluate(args, args.fuse, out, device, how)
        run_dirs = [published_models.result_dir(p) for p in args.runs]
        outputs = [evaluation_dir(run_dir, args.split, "single") for run_dir in run_dirs]
        if args.output and len(args.runs) > 1:
            outputs = [args.output / f"{i}-{run_dir.name}" for i, run_dir in enumerate(run_dirs)]
        elif args.output:
            outputs = [args.output]
        summaries = {str(p): _evaluate(args, [p], out, device)
                     for p, out in zip(args.runs, outputs, strict=True)}
        if args.query_langs and len(summaries) > 1:
            print("\n" + transfer_table(summaries))
    return next(iter(summaries.values())) if len(summaries) == 1 else summaries


def _default_output(path, split: str, name: str) -> Path:
    return evaluation_dir(published_models.result_dir(path), split, name)


def _evaluate(args, paths, out: Path, device: str, how: str = "sum") -> dict:
    """Evaluate one run or one fusion; write and print its metrics and predictions."""
    trained = training_langs(paths[0]) if args.query_langs else None  # before the work
    result, sims, sims_v2t, data = evaluate_runs(paths, args.split, args.dataset, device, how,
                                                 args.hybrid_q, pivots=args.sentence_pivots,
                                                 alignment=args.sentence_alignment,
                                                 pivot_nullspace=args.sentence_pivot_nullspace)
    summary = {"test" if args.split == "test" else args.split: result,
               "runs": [published_models.pinned(p) for p in paths],  # Hub ids with their commit
               "combination": how if len(paths) > 1 else None}
    v2t = None if sims_v2t is None else sims_v2t.numpy()
    write_predictions(evaluation_predictions_file(out), sims.numpy(), data.caption_mask.numpy(),
                      data.caption_ids, data.video_ids, v2t)
    if args.query_langs:
        summary.update(query_language_metrics(paths, args, device, how, trained))
    write_metrics(out, summary)
    print(results_table({"test": result}, title=f"{args.split} / {', '.join(map(str, paths))}"))
    if args.query_langs:
        print("\n" + transfer_table({str(paths[0]): summary}))
    print(f"\nwritten to {out}")
    return summary



def query_language_metrics(paths, args, device: str, how: str = "sum",
                           trained: list[str] | None = None) -> dict:
    """``per_language`` (t2v metrics of the split's captions of each ``--query-langs``
    language as queries, ranked over all the split's videos), ``query_langs``,
    ``training_langs``, ``text_langs`` (whose text the runs read: training captions and
    fitting text) and ``zero_shot_langs`` (the query languages among none of those) for
    metrics.json."""
    langs = check_query_langs(args.query_langs)
    result, _, _, data = evaluate_runs(paths, args.split, args.dataset, device, how,
                                       args.hybrid_q, langs=langs, pivots=args.sentence_pivots,
                                       alignment=args.sentence_alignment,
                                       pivot_nullspace=args.sentence_pivot_nullspace)
    found = set(data.caption_langs[data.caption_mask.numpy()].tolist())
    missing = [lang for lang in langs if lang not in found]
    if missing:
        raise RunError(f"--query-langs: the {args.split} split has no caption in {missing}")
    trained = trained if trained is not None else training_langs(paths[0])
    read = set().union(*(text_langs(path) for path in paths))
    return {"per_language": result["per_language"], "query_langs": langs,
            "training_langs": trained, "text_langs": sorted(read),
            "zero_shot_langs": [lang for lang in langs if lang not in read],
            "sentence_pivots": args.sentence_pivots,
            "sentence_alignment": args.sentence_alignment}


def cli() -> None:
    """The ``rudder-evaluate`` console script: :func:`main` with its return value dropped
    (exit status 0)."""
    main()


if __name__ == "__main__":
    cli()
