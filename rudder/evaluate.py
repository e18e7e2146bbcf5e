"""``python -m rudder.evaluate``: evaluate checkpoints on a split, alone or as an ensemble.

``--ensemble`` sums the similarity matrices of several runs (``fusion.ensemble_sum``);
``--fusion avg|max|hybrid`` fuses their rankings instead (Galanopoulos & Mezaris 2021).
Metrics and predictions are printed and written to ``--output`` (default: the first run's
``evaluations/<split>-<name>/``).
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import numpy as np
import torch

from rudder import fusion
from rudder.data.layout import LayoutError
from rudder.data.loader import build_class_index, load_split
from rudder.inference import query_ranks, similarity_matrix, split_metrics
from rudder.report import results_table
from rudder.runs import RunError, atomic_write_text, load_run
from rudder.trainer import pick_device


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="python -m rudder.evaluate",
        description="Evaluate trained runs (checkpoints) on a dataset split.",
    )
    parser.add_argument("runs", nargs="*", type=Path, help="run directories or checkpoint files")
    parser.add_argument("--ensemble", nargs="+", type=Path, default=[], metavar="RUN",
                        help="runs whose similarity matrices are summed")
    parser.add_argument("--fusion", choices=["sum", "avg", "max", "hybrid"], default="sum",
                        help="how several runs are combined (default: sum of similarities)")
    parser.add_argument("--hybrid-q", type=int, default=2, help="Q' of Hybrid rank fusion")
    parser.add_argument("--split", default="test", choices=["train", "validation", "test"])
    parser.add_argument("--dataset", help="dataset to evaluate on (default: the run's own)")
    parser.add_argument("--device", default="auto", choices=["auto", "cpu", "cuda"])
    parser.add_argument("--output", type=Path, help="folder for metrics.json and predictions.npz")
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
    args = build_parser().parse_args(argv)
    paths = list(args.runs) + list(args.ensemble)
    if not paths:
        build_parser().error("give at least one run directory or checkpoint")
    try:
        device = str(pick_device(args.device))
        result, sims, sims_v2t, data = evaluate_runs(paths, args.split, args.dataset, device, args.fusion, args.hybrid_q)
    except (RunError, LayoutError, ValueError) as error:
        print(f"error: {error}", file=sys.stderr)
        raise SystemExit(2) from None
    name = "ensemble" if len(paths) > 1 else "single"
    out = args.output or Path(paths[0] if Path(paths[0]).is_dir() else Path(paths[0]).parent.parent) / "evaluations" / f"{args.split}-{name}"
    out.mkdir(parents=True, exist_ok=True)
    summary = {"test" if args.split == "test" else args.split: result, "runs": [str(p) for p in paths], "combination": args.fusion}
    atomic_write_text(out / "metrics.json", json.dumps(summary, indent=2))
    ranks = query_ranks(sims, data, sims_v2t)
    np.savez_compressed(out / "predictions.npz", sims=sims.numpy(), query_masks=data.caption_mask.numpy(),
                        ranks_t2v=ranks["t2v"], ranks_v2t=ranks["v2t"])
    print(results_table({"test": result}, title=f"{args.split} / {', '.join(map(str, paths))}"))
    print(f"\nwritten to {out}")
    return summary


if __name__ == "__main__":
    main()
