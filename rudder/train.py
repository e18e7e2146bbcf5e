"""``python -m rudder.train``: train a Collaborative-Experts model and print a results table.

With no arguments it trains on the embedded sample dataset (Marathi, Hindi and English
captions, audio experts in all four languages). Every flag is a config override; the run
directory it writes (``runs/<time>-<name>-<loss>`` by default) is described in
docs/architecture.md ("Public API") and ``rudder/runs/layout.py``.
"""

from __future__ import annotations

import argparse
import copy
import json
import logging
import os
import shutil
import sys
import time
from pathlib import Path

import numpy as np

from rudder.cli import ArgumentParser, folder, int_in
from rudder.config import (
    MAX_EPOCHS,
    MAX_SEED,
    ConfigError,
    TrainConfig,
    apply_override,
    from_dict,
    load_yaml,
    to_dict,
)
from rudder.errors import RunError, exit_on_error
from rudder.evaluation.results_table import results_table, seeds_table
from rudder.optional import check_installed, config_needs
from rudder.runs.folders import (
    check_resume_changes,
    check_run_dir,
    default_run_dir,
    discard_unfinished,
    prepare_run_dir,
)
from rudder.runs.layout import (
    checkpoint_file,
    config_file,
    is_single_run,
    log_file,
    metrics_file,
    read_config,
    read_metrics,
    write_config,
    write_metrics,
)

log = logging.getLogger("rudder.train")

# rudder.losses.names(), spelled out so that --help imports no torch (tests check they agree).
LOSS_NAMES = ("mm", "triplet", "hn", "dw", "ot", "po", "ran", "ranp", "relevance_margin",
              "mimm_adaptive", "sms", "hn_exclusion")
SHORTHANDS = {
    "dataset": "data.dataset",
    "loss": "loss.name",
    "epochs": "epochs",
    "seed": "seed",
    "device": "device",
}


def build_parser() -> argparse.ArgumentParser:
    parser = ArgumentParser(
        prog="python -m rudder.train",
        description="Train a Collaborative-Experts text-video retrieval model and print its "
        "test metrics.",
    )
    parser.add_argument("--config", type=Path,
                        help="YAML config (fields of rudder.config.TrainConfig)")
    parser.add_argument("--output-dir", type=folder,
                        help="run directory (default runs/<time>-<name>-<loss>, time as "
                        "YYYYmmdd-HHMMSS)")
    parser.add_argument("--resume", action="store_true",
                        help="continue the run in --output-dir from last.pt")
    parser.add_argument("--overwrite", action="store_true",
                        help="replace an existing non-empty --output-dir")
    parser.add_argument("--set", dest="overrides", action="append", default=[], metavar="KEY=VALUE",
                        help="override any config field, e.g. --set loss.params.margin=0.1 "
                        "(repeatable)")
    parser.add_argument("--dataset",
                        help="'sample', a dataset folder, or a Hub repo id (data.dataset)")
    parser.add_argument("--loss",
                        help=f"loss name (loss.name): {', '.join(LOSS_NAMES)}; its parameters "
                        "via --set loss.params.X=V (the loss table of docs/architecture.md)")
    parser.add_argument("--epochs", type=int_in(1, MAX_EPOCHS), help="maximum number of epochs")
    parser.add_argument("--seed", type=int_in(0, MAX_SEED), help="random seed")
    parser.add_argument("--seeds", type=int_in(0, MAX_SEED), nargs="+",
                        help="train one run per seed and report mean ± std")
    parser.add_argument("--device", choices=["auto", "cpu", "cuda"], help="device (default auto)")
    return parser


def resolve_config(args, saved: dict | None = None, source: Path | None = None) -> TrainConfig:
    """Config from (saved run config or --config YAML) + shorthands + --set overrides.

    An invalid config names its file (``source``, a saved run's ``config.yaml``, or
    ``--config``) and whether this command's flags changed it."""
    data = saved if saved is not None else (load_yaml(args.config) if args.config else {})
    flags = bool(args.loss or args.overrides)
    if args.loss and data.get("loss", {}).get("name", args.loss) != args.loss:
        data["loss"] = {"name": args.loss}  # another loss: its parameters start from defaults
    for flag, key in SHORTHANDS.items():
        value = getattr(args, flag)
        if value is not None:
            flags = True
            apply_override(data, f"{key}={json.dumps(value)}")
    for assignment in args.overrides:
        apply_override(data, assignment)
    try:
        return from_dict(data)
    except ConfigError as error:
        origin = source or args.config
        if origin is None:
            raise
        raise ConfigError(f"{origin}{' with the command-line settings' if flags else ''}: "
                          f"{error}") from None


def resumed_config(args, run_dir: Path) -> TrainConfig:
    """The saved config of ``run_dir`` with this command's flags applied, when they change
    only what a resume may change (``rudder.runs.folders.RESUMABLE_KEYS``, e.g. ``--epochs``)."""
    saved = read_config(run_dir)
    config = resolve_config(args, copy.deepcopy(saved), config_file(run_dir))
    check_resume_changes(run_dir, saved, config)
    return config


def _generate_sample(config: TrainConfig) -> None:
    """On the first run on the sample: say where its dataset goes, generate it and say how
    long it took (later runs read it)."""
    if config.data.dataset != "sample":
        return
    from rudder.data.sample import SAMPLE_VERSION, cache_root, sample_dataset_path

    target = cache_root() / f"sample-v{SAMPLE_VERSION}"
    if (target / "rudder.json").is_file():
        return
    log.info("generating the simulated sample dataset into %s (once: later runs read it)",
             target)
    started = time.monotonic()
    sample_dataset_path()
    log.info("sample dataset generated in %.0f s", time.monotonic() - started)


def run(config: TrainConfig, run_dir: Path, resume: bool = False, overwrite: bool = False,
        files: dict | None = None) -> dict:
    """Train, select on validation, test the best checkpoint; returns metrics.json's content.

    ``files`` (name -> path) are copied into a new run folder before training starts, so the
    run keeps what it reads from there (``supervision.relations_file``'s relative path)."""
    from rudder.devices import pick_device
    from rudder.training.distributed import barrier, broadcast_object, init_distributed, shutdown
    from rudder.training.trainer import Trainer

    check_installed(config_needs(config))  # a missing extra fails before any work
    ctx = init_distributed(pick_device(config.device))
    run_dir = broadcast_object(run_dir, ctx)  # a default name has rank 0's timestamp
    created = False
    try:
        if ctx.is_main:
            created = prepare_run_dir(run_dir, resume, overwrite)
            for name, source in (files or {}).items():
                shutil.copyfile(source, run_dir / name)
            _log_to(log_file(run_dir))
            _generate_sample(config)
        barrier(ctx)
        trainer = Trainer(config, run_dir, ctx, resume=resume)
        if ctx.is_main and not resume:  # named once its data and config passed their checks
            log.info("run folder: %s (train.log, checkpoints/, metrics.json when done)",
                     run_dir)
        trainer.fit()
        trainer.test()
    except BaseException:
        if created:
            _close_log()
            discard_unfinished(run_dir)
        raise
    finally:
        shutdown(ctx)
        if ctx.is_main:
            _close_log()  # the run's log ends with the run (and the logger propagates again)
    return read_metrics(run_dir) if ctx.is_main else {}


def _log_to(path: Path) -> None:
    logger = logging.getLogger("rudder")
    logger.setLevel(logging.INFO)
    _close_log()
    file_handler = logging.FileHandler(path, encoding="utf-8")
    file_handler.setFormatter(logging.Formatter("%(asctime)s %(message)s"))
    console = logging.StreamHandler(sys.stderr)
    console.setFormatter(logging.Formatter("%(message)s"))
    logger.addHandler(file_handler)
    logger.addHandler(console)
    logger.propagate = False


def _close_log() -> None:
    logger = logging.getLogger("rudder")
    for handler in list(logger.handlers):
        logger.removeHandler(handler)
        handler.close()
    logger.propagate = True


def _run_seeds(args) -> dict:
    """One run per seed in ``<run_dir>/seed-<s>``, beside the group's ``config.yaml``.

    On ``--resume`` the group's config.yaml is the truth for seeds not started yet, and each
    started seed continues from its own config.yaml (flags applied as for a single resume);
    a finished seed whose config is unchanged is kept.
    """
    if args.seed is not None:
        raise ConfigError("--seed and --seeds cannot be combined; list every seed in --seeds")
    if int(os.environ.get("WORLD_SIZE", "1")) > 1:
        raise RunError("--seeds trains the seeds one after another in one process group, which "
                       "torchrun cannot give it: launch one torchrun per seed with --seed S")
    if args.resume:
        run_dir = args.output_dir
        if is_single_run(run_dir):
            raise RunError(
                f"{run_dir} is a single run, not a --seeds run; resume it without --seeds")
        check_run_dir(run_dir, resume=True, overwrite=args.overwrite, marker=config_file(run_dir))
        config = resumed_config(args, run_dir)
        check_installed(config_needs(config))
    else:
        config = resolve_config(args)
        check_installed(config_needs(config))  # before --overwrite removes anything
        for seed in args.seeds:  # every seed valid before the first one trains
            from_dict({**to_dict(config), "seed": seed})
        run_dir = args.output_dir or default_run_dir(f"{config.name}-{config.loss.name}")
        check_run_dir(run_dir, resume=False, overwrite=args.overwrite)
        if args.overwrite and run_dir.exists():
            shutil.rmtree(run_dir)
    created = not run_dir.exists()
    try:
        write_config(run_dir, config)
        results = {seed: _run_seed(args, config, run_dir / f"seed-{seed}", seed)
                   for seed in args.seeds}
    except BaseException:
        if created:
            _close_log()
            discard_unfinished(run_dir)
        raise
    summary = aggregate_seeds(results)
    write_metrics(run_dir, summary)
    print(seeds_table(summary))
    print(f"\nruns: {', '.join(str(run_dir / f'seed-{seed}') for seed in args.seeds)}; "
          f"mean ± std in {metrics_file(run_dir)}")
    return summary


def _run_seed(args, config: TrainConfig, seed_dir: Path, seed: int) -> dict:
    if args.resume and checkpoint_file(seed_dir, "last").is_file():
        seed_config = resumed_config(args, seed_dir)
        finished = metrics_file(seed_dir).is_file()
        if finished and to_dict(seed_config) == read_config(seed_dir):
            return read_metrics(seed_dir)
        return run(seed_config, seed_dir, resume=True)
    # A seed folder without a checkpoint holds nothing to keep.
    seed_config = from_dict({**to_dict(config), "seed": seed})
    return run(seed_config, seed_dir, overwrite=args.overwrite or args.resume)


def aggregate_seeds(results: dict[int, dict]) -> dict:
    """Mean and sample standard deviation (ddof=1) of every test metric over seeds; a metric
    that is n/a (``None``) in any seed is n/a in the summary."""
    first = next(iter(results.values()))["test"]
    summary: dict = {"seeds": sorted(results), "test": {}}
    for direction in ("t2v", "v2t"):
        summary["test"][direction] = {}
        for key in first[direction]:
            seeds = [r["test"][direction][key] for r in results.values()]
            if any(v is None for v in seeds):
                summary["test"][direction][key] = {"mean": None, "std": None}
                continue
            values = np.array(seeds, dtype=np.float64)
            std = float(values.std(ddof=1)) if len(values) > 1 else 0.0
            summary["test"][direction][key] = {"mean": float(values.mean()), "std": std}
    return summary


def main(argv: list[str] | None = None) -> dict:
    args = build_parser().parse_args(argv)
    with exit_on_error():
        if args.resume:
            if args.output_dir is None:
                raise RunError("--resume needs --output-dir (the run to continue)")
            if args.config:
                raise RunError("--resume uses the run's own config.yaml; drop --config")
        if args.seeds:
            return _run_seeds(args)
        if args.resume:
            if any(config_file(seed_dir).is_file() for seed_dir in args.output_dir.glob("seed-*")):
                raise RunError(f"{args.output_dir} is a --seeds run; resume it with --seeds")
            check_run_dir(args.output_dir, resume=True, overwrite=args.overwrite)
            config = resumed_config(args, args.output_dir)
        else:
            config = resolve_config(args)
            if args.output_dir is not None:  # an unusable folder, before any work
                check_run_dir(args.output_dir, resume=False, overwrite=args.overwrite)
        run_dir = args.output_dir or default_run_dir(f"{config.name}-{config.loss.name}")
        result = run(config, run_dir, resume=args.resume, overwrite=args.overwrite)
    if result:
        print(results_table(result, title=f"{config.name} / loss {config.loss.name} / {run_dir}"))
    return result



def cli() -> None:
    """The ``rudder-train`` console script: :func:`main` with its return value dropped
    (exit status 0)."""
    main()


if __name__ == "__main__":
    cli()
