"""The training loop: batches, supervision matrices, loss, evaluation, checkpoints, resume."""

from __future__ import annotations

import logging
import math
import sys
import uuid
from contextlib import nullcontext
from pathlib import Path

import torch
from tqdm import tqdm

from rudder import losses, models
from rudder.config import (
    ConfigError,
    TrainConfig,
    check_new_run,
    resolved_config,
    to_dict,
    with_caption_langs,
)
from rudder.data.batching import epoch_batches
from rudder.data.loader import build_class_index, load_split, select_experts
from rudder.data.lookup import resolve_dataset
from rudder.data.text_side import (
    build_text_side,
    cache_shards,
    caption_langs_note,
    encoder_summary,
)
from rudder.devices import pick_device, upload
from rudder.errors import RunError
from rudder.evaluation.inference import similarity_matrix, split_metrics
from rudder.evaluation.predictions import write_predictions
from rudder.evaluation.selection import improves, reported_value, selection_key
from rudder.runs.checkpoints import (
    CHECKPOINT_VERSION,
    atomic_torch_save,
    link_or_copy,
    load_checkpoint,
    restore_generator,
    restore_scaler,
)
from rudder.runs.folders import environment_record
from rudder.runs.layout import (
    append_history,
    checkpoint_file,
    env_file,
    predictions_file,
    truncate_history,
    write_config,
    write_json,
    write_metrics,
)
from rudder.runs.trained_model import TrainedModel, load_text_side
from rudder.text.subwords import vocabulary_from_dict
from rudder.training.batch_supervision import BatchSupervision
from rudder.training.distributed import DistContext, barrier, gather_with_grad, shard, wrap_encoder
from rudder.training.optim import build_optimizer, build_scheduler

log = logging.getLogger("rudder.train")


class Trainer:
    """Train one configuration into one run directory (the run folder of docs/architecture.md).

    ``self.config`` is the run's resolved copy of the given config
    (:func:`rudder.config.resolved_config`), the one saved as ``config.yaml``; the caller's
    config is not changed."""

    def __init__(self, config: TrainConfig, run_dir: Path, ctx: DistContext, resume: bool = False):
        self.config, self.run_dir, self.ctx, self.resume = config, Path(run_dir), ctx, resume
        if not resume:
            check_new_run(config)
        self.device = pick_device(config.device)
        if ctx.enabled and self.device.type == "cuda":
            self.device = torch.device("cuda", ctx.local_rank)
            torch.cuda.set_device(self.device)
        if self.device.type == "cpu" and config.cpu_threads > 0:
            torch.set_num_threads(config.cpu_threads)
        if config.sync_batchnorm and self.device.type != "cuda":
            raise ConfigError("sync_batchnorm needs CUDA (torch's SyncBatchNorm has no CPU kernel)")
        torch.manual_seed(config.seed)
        self.folder = resolve_dataset(config.data.dataset)
        given = bool(config.data.caption_langs)
        self.config = config = with_caption_langs(config, self.folder.meta.languages)
        self.fingerprint = self.folder.fingerprint()
        self.experts = select_experts(self.folder, config.data.experts, config.data.audio_langs)
        self.state: dict | None = None
        if resume:
            self.state = load_checkpoint(checkpoint_file(self.run_dir, "last"))
            if not self.state["fingerprint"].startswith(self.fingerprint):
                raise RunError(
                    f"cannot resume {run_dir}: its dataset changed since it started "
                    f"(fingerprint {self.fingerprint}, "
                    f"run {self.state['fingerprint'].split('-')[0]})"
                )
            self.vocab = vocabulary_from_dict(self.state["vocab"])
            initial_embeddings = None
        else:
            text_side = build_text_side(self.folder, config.data, config.seed)
            self.vocab, initial_embeddings = text_side.vocab, text_side.initial_embeddings
        self.class_index = build_class_index(self.folder)
        self.text_encoder = load_text_side(config.data, self.folder, str(self.device))
        cached = cache_shards(self.text_encoder)
        self.splits = {s: self._load(s) for s in ("train", config.data.val_split)}
        self.supervision = BatchSupervision(config, self.folder, self.splits["train"], self.device,
                                            self.run_dir)
        # parameters the loss takes from the run (dw's dim, ...), recorded in config.yaml
        supplied = losses.run_params(config.loss.name, config.loss.params, self.supervision)
        self.config = config = resolved_config(
            config, supplied,
            word_dim=None if initial_embeddings is None else int(initial_embeddings.shape[1]),
            text_input_dim=None if self.text_encoder is None else int(self.text_encoder.dim))
        self.loss_fn = losses.build(config.loss.name, **config.loss.params)
        self.loss_fn.check_values = False  # its inputs are made here; fit() checks the loss
        if (config.selection.endswith((".nDCG", ".mAP"))
                and self.splits[config.data.val_split].nouns is None):
            raise ConfigError(
                f"selection={config.selection} needs noun/verb classes, but {self.folder.root} "
                "has none; choose another selection or label the dataset with "
                "`python -m heuristics label`"
            )
        expert_info = {e: self.folder.meta.experts[e] for e in self.experts}
        self.trained = TrainedModel.new(config, expert_info, self.vocab, self.folder,
                                        self.run_dir, str(self.device), initial_embeddings,
                                        self.text_encoder)
        if config.sync_batchnorm:
            self.trained.model = torch.nn.SyncBatchNorm.convert_sync_batchnorm(self.trained.model)
        self.model = self.trained.model.to(self.device)
        # load_split validated the data; checks would sync the GPU (a MODEL_INTERFACE attribute)
        models.interface(self.model).check_values = False
        self.encoder = wrap_encoder(self.model, ctx, self.device, config.compile)
        self.optimizer = build_optimizer(self.model.parameters(), config.optim)
        self.scheduler = build_scheduler(self.optimizer, config.optim, config.epochs)
        self.scaler = torch.amp.GradScaler("cuda", enabled=self.use_amp)
        self.sampler_rng = torch.Generator().manual_seed(config.seed)
        self.loss_rng = torch.Generator(device=self.device).manual_seed(config.seed + 1)
        self.epoch, self.best_score, self.best_epoch, self.bad_evals = 0, -math.inf, 0, 0
        self.best_tiebreak = -math.inf
        self.run_id = uuid.uuid4().hex[:8]
        if self.state is not None:
            self._restore(self.state)
            log.info(self._resume_line())
        else:
            why = ("data.caption_langs" if given else "the sample's default"
                   if config.data.dataset == "sample" else "the dataset's own")
            log.info(caption_langs_note(self.folder, config.data.caption_langs, why))
            log.info(encoder_summary(config.data.text_encoder, self.text_encoder, cached)
                     if config.data.text_encoder else text_side.summary)

    def _resume_line(self) -> str:
        done = f"resuming {self.run_dir}: {self.epoch} of at most {self.config.epochs} epochs done"
        if self.epoch >= self.config.epochs or self._patience_exhausted():
            return f"{done}, training is over; testing its best epoch {self.best_epoch}"
        return (f"{done}; resuming from epoch {self.epoch + 1} "
                f"(best so far: epoch {self.best_epoch})")

    @property
    def use_amp(self) -> bool:
        return self.config.amp and self.device.type == "cuda"

    def _load(self, split: str):
        data = self.config.data
        return load_split(
            self.folder, split, self.experts, self.vocab, data.caption_langs,
            self.class_index, data.max_words, data.max_frames, self.text_encoder,
        )

    # -- one step -------------------------------------------------------------------------
    def _step(self, videos: torch.Tensor, slots: torch.Tensor) -> torch.Tensor:
        train = self.splits["train"]
        videos, slots, own_slots = self.supervision.positives(videos, slots, self.sampler_rng)
        local = shard(torch.arange(len(videos)), self.ctx)
        lv, ls = videos[local], slots[local]
        autocast = torch.autocast("cuda", dtype=torch.float16) if self.use_amp else nullcontext()
        with autocast:
            inputs, mask = train.text_input(*self.supervision.caption_cells(lv, ls))
            features, masks, available = train.video_batch(lv, self.device)
            text, logits, video = self.encoder(upload(inputs, self.device),
                                               upload(mask, self.device), features, masks,
                                               available)
        text, logits, video, available = gather_with_grad([text, logits, video, available],
                                                          self.ctx, len(videos))
        sims = models.interface(self.model).similarity(
            text, logits, video, available, check_values=False
        )
        loss = self.loss_fn(sims, **self.supervision.batch(videos, slots, own_slots, self.loss_rng))
        self.optimizer.zero_grad(set_to_none=True)
        self.scaler.scale(loss).backward()
        self.scaler.unscale_(self.optimizer)
        if self.config.optim.grad_clip:
            torch.nn.utils.clip_grad_norm_(self.model.parameters(), self.config.optim.grad_clip)
        self.scaler.step(self.optimizer)
        self.scaler.update()
        return loss.detach()  # read back once per epoch, not per step (no host sync here)

    # -- epochs, evaluation, checkpoints ----------------------------------------------------
    def _score(self, data) -> tuple[dict, torch.Tensor]:
        """Metrics and the similarity matrix of the current model on a loaded split."""
        sims = similarity_matrix(self.model, data, self.device, self.config.data.max_words,
                                 self.config.data.max_frames)
        return split_metrics(sims, data, self.config.supervision.rho), sims

    def fit(self) -> None:
        """Train until ``epochs`` or early stopping; keeps ``last.pt`` and ``best.pt``."""
        cfg, train = self.config, self.splits["train"]
        if self.ctx.is_main:
            # On resume: records what the resume changed (epochs, ...).
            write_config(self.run_dir, cfg)
            if not self.resume:
                write_json(env_file(self.run_dir), environment_record(self.fingerprint))
        writer = self._tensorboard()
        while self.epoch < cfg.epochs and not self._patience_exhausted():
            self._seed_other_ranks()
            batches = epoch_batches(train.caption_mask, cfg.data.batch_size, self.sampler_rng,
                                    cfg.data.caption_sampling, self.supervision.relation_pairs,
                                    cfg.supervision.relation_pinning,
                                    cfg.supervision.relation_share)
            self.model.train()
            quiet = not sys.stderr.isatty() or not self.ctx.is_main
            losses_seen = [
                self._step(videos, slots)
                for videos, slots in tqdm(batches, desc=f"epoch {self.epoch + 1}/{cfg.epochs}",
                                          leave=False, disable=quiet)
            ]
            train_loss = float(torch.stack(losses_seen).mean()) if losses_seen else float("nan")
            if losses_seen and not math.isfinite(train_loss):
                raise FloatingPointError(f"the training loss became {train_loss} in epoch "
                                         f"{self.epoch + 1}; lower optim.lr")
            self.scheduler.step()
            self.epoch += 1
            result, _ = self._score(self.splits[cfg.data.val_split])
            key = selection_key(result, cfg.selection)
            score = key[0]
            improved = improves(key, (self.best_score, self.best_tiebreak))
            if improved:
                (self.best_score, self.best_tiebreak), self.best_epoch, self.bad_evals = (
                    key, self.epoch, 0)
            else:
                self.bad_evals += 1
            if self.ctx.is_main:
                self._log_epoch(train_loss, result, score, improved, writer)
                self._save("last")
                if improved:  # the same bytes: a second name for last.pt, not a second write
                    link_or_copy(checkpoint_file(self.run_dir, "last"),
                                 checkpoint_file(self.run_dir, "best"))
            barrier(self.ctx)
        if writer is not None:
            writer.close()
        if self._patience_exhausted() and self.ctx.is_main:
            log.info("early stopping: the validation selection score did not improve for %d "
                     "epoch(s) (patience); stopped after epoch %d of at most %d, best epoch %d",
                     self.config.patience, self.epoch, cfg.epochs, self.best_epoch)

    def _seed_other_ranks(self) -> None:
        """Give every process but rank 0 its own dropout stream for the coming epoch.

        The global generator drives dropout; seeded alike, every process drew rank 0's masks
        for its own share of the batch (open_clip seeds ``seed + rank`` likewise). Rank 0's
        stream runs on and is saved in checkpoints; the others start each epoch from
        ``(seed, rank, epoch)``, so a resume, which starts at an epoch, repeats them exactly."""
        if self.ctx.rank > 0:
            torch.manual_seed(self.config.seed + 1_000_003 * self.ctx.rank + self.epoch)

    def _patience_exhausted(self) -> bool:
        return self.config.patience > 0 and self.bad_evals >= self.config.patience

    def _log_epoch(self, train_loss, result, score, improved, writer) -> None:
        t2v, v2t = result["t2v"], result["v2t"]
        lr = self.optimizer.param_groups[0]["lr"]
        value = reported_value(score, self.config.selection)  # MdR-like criteria: not negated
        log.info(
            "epoch %d/%d  loss %.4f  val t2v R1 %.1f R5 %.1f R10 %.1f MdR %.1f | "
            "v2t R1 %.1f R10 %.1f  select %.2f%s", self.epoch, self.config.epochs, train_loss,
            t2v["R1"], t2v["R5"],
            t2v["R10"], t2v["MdR"], v2t["R1"], v2t["R10"], value, "  *best*" if improved else "",
        )
        line = {"epoch": self.epoch, "split": self.config.data.val_split, "train_loss": train_loss,
                "lr": lr, "selection": value, **result}
        append_history(self.run_dir, line)
        if writer is not None:
            writer.add_scalar("train/loss", train_loss, self.epoch)
            for direction in ("t2v", "v2t"):
                for key, value in result[direction].items():
                    if value is not None:  # an n/a metric (no query with a relevant item)
                        writer.add_scalar(f"validation/{direction}/{key}", value, self.epoch)

    def _tensorboard(self):
        if not (self.config.tensorboard and self.ctx.is_main):
            return None
        from torch.utils.tensorboard import SummaryWriter

        return SummaryWriter(str(self.run_dir / "tensorboard"))

    def _save(self, name: str) -> None:
        state = {
            "version": CHECKPOINT_VERSION,
            "config": to_dict(self.config),
            "experts": {e: vars(self.folder.meta.experts[e]) for e in self.experts},
            "vocab": self.vocab.to_dict(),
            "fingerprint": f"{self.fingerprint}-{self.run_id}-e{self.epoch}",
            "model": self.model.state_dict(),
            "optimizer": self.optimizer.state_dict(),
            "scheduler": self.scheduler.state_dict(),
            "scaler": self.scaler.state_dict(),
            "rng": {
                "torch": torch.get_rng_state(),
                "cuda": torch.cuda.get_rng_state_all() if torch.cuda.is_available() else None,
                "sampler": self.sampler_rng.get_state(),
                "loss": self.loss_rng.get_state(),
            },
            "epoch": self.epoch,
            "best_score": self.best_score,
            "best_tiebreak": self.best_tiebreak,
            "best_epoch": self.best_epoch,
            "bad_evals": self.bad_evals,
        }
        atomic_torch_save(state, checkpoint_file(self.run_dir, name))

    def _restore(self, state: dict) -> None:
        self.model.load_state_dict(state["model"])
        self.optimizer.load_state_dict(state["optimizer"])
        self.scheduler.load_state_dict(state["scheduler"])
        restore_scaler(self.scaler, state["scaler"])
        torch.set_rng_state(state["rng"]["torch"])
        if state["rng"]["cuda"] is not None and torch.cuda.is_available():
            torch.cuda.set_rng_state_all(state["rng"]["cuda"])
        self.sampler_rng.set_state(state["rng"]["sampler"])
        restore_generator(self.loss_rng, state["rng"]["loss"],
                          self.config.seed + 1 + 1000 * state["epoch"])
        self.epoch, self.best_score = state["epoch"], state["best_score"]
        # Checkpoints written before the tie rule have no best_tiebreak.
        self.best_tiebreak = state.get("best_tiebreak", -math.inf)
        self.best_epoch, self.bad_evals = state["best_epoch"], state["bad_evals"]
        truncate_history(self.run_dir, self.epoch)
        last, best = checkpoint_file(self.run_dir, "last"), checkpoint_file(self.run_dir, "best")
        best_is_last = self.best_epoch == self.epoch and self.ctx.is_main
        if best_is_last and (not best.exists() or load_checkpoint(best)["epoch"] != self.epoch):
            link_or_copy(last, best)  # a stop came between last.pt and its best.pt link

    def test(self) -> dict:
        """Evaluate ``best.pt`` on the test split; write predictions and ``metrics.json``."""
        best = load_checkpoint(checkpoint_file(self.run_dir, "best"), map_location=self.device)
        self.model.load_state_dict(best["model"])
        # Training is over: free the train/validation tensors (the supervision holds the
        # training split too) before the test split.
        self.splits.clear()
        self.supervision = None  # type: ignore[assignment]  # released: training is over
        data = self._load("test")
        result, sims = self._score(data)
        if self.ctx.is_main:
            write_predictions(predictions_file(self.run_dir, "test"), sims.numpy(),
                              data.caption_mask.numpy(), data.caption_ids, data.video_ids)
            summary = {"test": result, "best_epoch": best["epoch"], "epochs_run": self.epoch,
                       "selection": {self.config.selection: reported_value(
                           best["best_score"], self.config.selection)}}
            write_metrics(self.run_dir, summary)
        return result

