"""``python -m rudder.evaluate``: evaluate checkpoints on a split, alone or as an ensemble.

``rudder.evaluate A B`` evaluates each run on its own. ``--ensemble A B`` sums the similarity
matrices of the runs (``fusion.ensemble_sum``); ``--fusion avg|max|hybrid`` fuses their
rankings instead (Galanopoulos & Mezaris 2021). Metrics and predictions are printed and
written to ``--output`` (default: the run's ``evaluations/<split>-single/``, or the first
ensemble run's ``evaluations/<split>-ensemble-<fusion>/``, so fusions never overwrite each
other; with several single runs, ``--output`` gets one sub-folder per run).
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import torch

from rudder import fusion
from rudder.atomic import atomic_savez
from rudder.data.loader import build_class_index, load_split
from rudder.devices import pick_device
from rudder.errors import RunError, exit_on_error
from rudder.inference import query_ranks, similarity_matrix, split_metrics
from rudder.report import results_table
from rudder.runs import atomic_write_text, find_checkpoint, load_run


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="python -m rudder.evaluate",
        description="Evaluate trained runs (checkpoints) on a dataset split.",
    )
    parser.add_argument("runs", nargs="*", type=Path, help="run directories or checkpoint files, each evaluated alone")
    parser.add_argument("--ensemble", nargs="+", type=Path, default=[], metavar="RUN",
                        help="runs combined into one ensemble (see --fusion)")
    parser.add_argument("--fusion", choices=["sum", "avg", "max", "hybrid"],
                        help="how --ensemble runs are combined (default: sum of similarities)")
    parser.add_argument("--hybrid-q", type=int, default=2, help="Q' of Hybrid rank fusion")
    parser.add_argument("--split", default="test", choices=["train", "validation", "test"])
    parser.add_argument("--dataset", help="dataset to evaluate on (default: the run's own)")
    parser.add_argument("--device", default="auto", choices=["auto", "cpu", "cuda"])
    parser.add_argument("--output", type=Path, help="folder for metrics.json and predictions.npz "
                        "(several single runs: one sub-folder per run)")
    return parser


def evaluate_runs(paths, split="test", dataset=None, device="cpu", how="sum", hybrid_q=2):
    """Metrics of one run or a combination of runs on ``split``.

    Returns ``(metrics, sims, sims_v2t, data)``; ``sims_v2t`` is ``sims`` except under rank
    fusion, which ranks each direction separately.
    """
    loaded = [load_run(p, device=device, dataset=dataset) for p in paths]
    first = loaded[0]
    for other in loaded[1:]:
        if other.experts != first.experts or other.config.data.caption_langs != first.config.data.caption_langs:
            raise RunError(f"{other.run_dir} uses other experts or caption languages than {first.run_dir}")
    class_index = build_class_index(first.dataset)
    matrices = []
    for run in loaded:
        cfg = run.config.data
        encoder = None
        if cfg.text_encoder:
            from rudder.text.pretrained import load_text_encoder

            encoder = load_text_encoder(cfg.text_encoder, device, run.dataset)
        data = load_split(run.dataset, split, run.experts, run.vocab, cfg.caption_langs,
                          class_index, cfg.max_words, cfg.max_frames, encoder)
        matrices.append(similarity_matrix(run.model, data, torch.device(device), cfg.eval_batch_size))
    sims_v2t = None
    if len(matrices) == 1:
        sims = matrices[0]
    elif how == "sum":
        sims = torch.as_tensor(fusion.ensemble_sum(matrices), dtype=torch.float32)
    else:
        sims, sims_v2t = _fused(matrices, data.caption_mask.flatten(), how, hybrid_q)
    sims_v2t = sims if sims_v2t is None else sims_v2t
    return split_metrics(sims, data, first.config.supervision.rho, sims_v2t), sims, sims_v2t, data


def _fused(matrices, valid, how, hybrid_q):
    """Rank fusion per text query (t2v) and, separately, per video query over valid captions."""
    q = hybrid_q if how == "hybrid" else None
    t2v = torch.as_tensor(fusion.fuse_ranks([m.numpy() for m in matrices], how, q), dtype=torch.float32)
    v2t = torch.full_like(t2v, float("-inf"))
    fused = fusion.fuse_ranks([m[valid].T.numpy() for m in matrices], how, q)
    v2t[valid] = torch.as_tensor(fused, dtype=torch.float32).T
    return t2v, v2t


def main(argv: list[str] | None = None) -> dict:
    """Evaluate; returns the summary written to metrics.json, or ``{run: summary}`` when
    several runs are evaluated one by one."""
    args = build_parser().parse_args(argv)
    if bool(args.runs) == bool(args.ensemble):
        build_parser().error("give run directories to evaluate each alone, or --ensemble RUN RUN ... to combine runs")
    if args.fusion and not args.ensemble:
        build_parser().error("--fusion combines the runs of --ensemble")
    if args.ensemble and len(args.ensemble) < 2:
        build_parser().error("--ensemble needs at least two runs")
    with exit_on_error():
        device = str(pick_device(args.device))
        if args.ensemble:
            how = args.fusion or "sum"
            name = f"ensemble-{how}" + (f"{args.hybrid_q}" if how == "hybrid" else "")
            return _evaluate(args, args.ensemble, args.output or _default_output(args.ensemble[0], args.split, name), device, how)
        outputs = [_default_output(p, args.split, "single") for p in args.runs]
        if args.output and len(args.runs) > 1:
            outputs = [args.output / f"{i}-{out.parent.parent.name}" for i, out in enumerate(outputs)]
        elif args.output:
            outputs = [args.output]
        summaries = {str(p): _evaluate(args, [p], out, device) for p, out in zip(args.runs, outputs)}
    return next(iter(summaries.values())) if len(summaries) == 1 else summaries


def _default_output(path: Path, split: str, name: str) -> Path:
    return find_checkpoint(path).parent.parent / "evaluations" / f"{split}-{name}"


def _evaluate(args, paths, out: Path, device: str, how: str = "sum") -> dict:
    """Evaluate one run or one ensemble; write and print its metrics and predictions."""
    result, sims, sims_v2t, data = evaluate_runs(paths, args.split, args.dataset, device, how, args.hybrid_q)
    summary = {"test" if args.split == "test" else args.split: result, "runs": [str(p) for p in paths],
               "combination": how if len(paths) > 1 else None}
    ranks = query_ranks(sims, data, sims_v2t)
    atomic_savez(out / "predictions.npz", sims=sims.numpy(), query_masks=data.caption_mask.numpy(),
                 ranks_t2v=ranks["t2v"], ranks_v2t=ranks["v2t"])
    atomic_write_text(out / "metrics.json", json.dumps(summary, indent=2))
    print(results_table({"test": result}, title=f"{args.split} / {', '.join(map(str, paths))}"))
    print(f"\nwritten to {out}")
    return summary



def cli() -> None:
    """The ``rudder-evaluate`` console script: :func:`main` with its return value dropped (exit status 0)."""
    main()


if __name__ == "__main__":
    cli()
