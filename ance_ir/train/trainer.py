"""The training loop: groups -> contrastive loss -> AdamW, with checkpoints, ANN refreshes and logging.

Step boundaries are where everything but the optimizer happens: checkpoints, synchronous refreshes,
switching to newer ANCE negatives, reacting to Ctrl-C. Under torchrun every rank draws the same global
batch (same pair order, same sampler RNG) and trains on its own contiguous slice; rank 0 alone writes
files, runs synchronous refreshes and owns the inferencer, and tells the other ranks which negatives
version to use at each boundary.
"""

from __future__ import annotations

import contextlib
import math
import random
import signal
import sys
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import torch
from torch.nn.parallel import DistributedDataParallel
from tqdm import tqdm
from transformers.utils import logging as hf_logging

from ance_ir.modeling import DenseEncoder
from ance_ir.train.arguments import TrainConfig, check_resumable
from ance_ir.train.checkpoint import (
    capture_rng,
    checkpoint_dir,
    latest_checkpoint,
    load_trainer_state,
    prune_checkpoints,
    remove_partial,
    resolve_init,
    restore_rng,
    save_checkpoint,
)
from ance_ir.train.collator import Collator, Group, in_batch_mask
from ance_ir.train.dataset import PairStream, TrainData
from ance_ir.train.distributed import Distributed
from ance_ir.train.layout import RunDir
from ance_ir.train.loss import build_loss
from ance_ir.train.modeling import GROUPS, DualEncoderModule, grad_norm, layer_groups
from ance_ir.train.negatives import build_sampler
from ance_ir.train.optim import Precision, build_optimizer, linear_schedule
from ance_ir.train.process import STOP_GRACE_S, InferencerProcess
from ance_ir.train.refresh import RefreshJob, describe, refresh_checkpoint, refresh_needed
from ance_ir.train.runlog import RunLog
from ance_ir.train.store import NegativesStore, RefreshRecords

STALENESS_POLL_S = 0.05


def _say(message: str) -> None:
    tqdm.write(message, file=sys.stderr)


@dataclass
class Window:
    """What happened since the last log record."""

    started: float = field(default_factory=time.perf_counter)
    steps: int = 0
    examples: int = 0
    loss: float = 0.0
    norms: dict[str, list[float]] = field(default_factory=dict)
    lr: float = 0.0
    pause_s: float = 0.0
    busy_steps: int = 0

    def add_norm(self, name: str, value: float | None) -> None:
        if value is not None:
            self.norms.setdefault(name, []).append(value)

    def mean_norm(self, name: str) -> float | None:
        values = self.norms.get(name)
        return sum(values) / len(values) if values else None


class Trainer:
    """One training run in ``config.output``, resumed from its latest checkpoint when there is one."""

    def __init__(self, config: TrainConfig, resume: bool = False):
        self.config = config
        self.run = RunDir(Path(config.output))
        hf_logging.disable_progress_bar()  # one progress bar: the trainer's
        if config.threads:
            torch.set_num_threads(config.threads)
        self.dist = Distributed.init(config.device)
        self.device = self.dist.device
        self.precision = Precision(config.precision, self.device)
        if config.batch_size % self.dist.world_size:
            raise ValueError(f"batch_size {config.batch_size} must be divisible by the number of processes "
                             f"({self.dist.world_size})")
        self.log = RunLog(self.run.log, enabled=self.dist.is_main)
        self.store = NegativesStore(self.run.negatives)
        self.records = RefreshRecords(self.run.refresh)
        start = latest_checkpoint(self.run)
        if resume and start is None:
            raise ValueError(f"{self.run.root}: no checkpoint to resume from")
        if self.dist.is_main:
            self._prepare_output(start)
        self.dist.barrier()

        if self.dist.is_main:  # first, so that a dataset is fetched once
            self.data = TrainData.load(config)
        self.dist.barrier()
        if not self.dist.is_main:
            self.data = TrainData.load(config)
        random.seed(config.seed)
        np.random.seed(config.seed)
        torch.manual_seed(config.seed + self.dist.rank)  # dropout masks differ between ranks
        if start is not None:
            self.encoder = DenseEncoder.from_pretrained(start)
        else:
            source = resolve_init(config.init_from) if config.init_from else config.model
            self.encoder = DenseEncoder.from_pretrained(source, **config.encoder_overrides())
        self.encoder.to(self.device)
        module = DualEncoderModule(self.encoder)
        self.model: torch.nn.Module = module
        if self.dist.enabled:
            ids = [self.device.index] if self.device.type == "cuda" else None
            self.model = DistributedDataParallel(module, device_ids=ids)
        self.layer_groups = layer_groups(module)
        self.optimizer = build_optimizer(module, config.lr, config.weight_decay)
        global_batch = config.batch_size * config.grad_accumulation
        self.total_steps = config.max_steps or math.ceil(config.epochs * len(self.data.pairs) / global_batch)
        warmup = config.warmup_steps or round(config.warmup_ratio * self.total_steps)
        self.scheduler = linear_schedule(self.optimizer, warmup, self.total_steps)
        self.loss_fn = build_loss(config.loss, config.temperature)
        self.sampler = build_sampler(config, self.data, self.run, self.dist)
        self.stream = PairStream(len(self.data.pairs), config.seed)
        self.rng = random.Random(config.seed)
        self.collator = Collator(self.encoder, self.data.queries, self.data.texts, config.passage_buckets)
        self.refreshing = refresh_needed(config) and (config.refresh_every > 0 or self.sampler.refreshed)
        self._job: RefreshJob | None = None
        self.inferencer: InferencerProcess | None = None
        self.step = 0
        self._staleness: int | None = None
        self._saved_step: int | None = None
        self._interrupted = False
        self._death_reported = False
        self.window = Window()
        if start is not None:
            self._restore(start)

    @property
    def version(self) -> int | None:
        """The negatives version in use (ANCE), else None."""
        return getattr(self.sampler, "version", None)

    def _prepare_output(self, start: Path | None) -> None:
        """Rank 0: write or check ``config.json``; clean up after a killed run."""
        self.run.root.mkdir(parents=True, exist_ok=True)
        if start is None:
            self.config.save(self.run.config)
            return
        changed = check_resumable(TrainConfig.load(self.run.config), self.config, self.run.config)
        if changed:
            _say(f"resuming with new {', '.join(changed)}")
            self.config.save(self.run.config)
        remove_partial(self.run)

    def _restore(self, folder: Path) -> None:
        state = load_trainer_state(folder)
        self.optimizer.load_state_dict(state["optimizer"])
        self.scheduler.load_state_dict(state["scheduler"])
        if self.precision.scaler is not None and state.get("scaler"):
            self.precision.scaler.load_state_dict(state["scaler"])
        self.step = self._saved_step = state["step"]
        self.stream.load_state_dict(state["data"])
        self.rng.setstate(state["sampler_rng"])
        if len(state["rng"]) == self.dist.world_size:
            restore_rng(state["rng"][self.dist.rank])
        elif self.dist.is_main:
            _say(f"warning: {folder} was saved by {len(state['rng'])} processes, this run has "
                 f"{self.dist.world_size}; random states are not restored exactly")
        if state["negatives_version"] is not None:
            self.sampler.update(state["negatives_version"], self.store.load(state["negatives_version"]))
        self.log.rewind(self.step)
        self.log.write({"event": "resume", "step": self.step, "checkpoint": str(folder),
                        "negatives_version": self.version})
        if self.dist.is_main:
            _say(f"resuming from {folder}")

    # ---- the loop ----

    def train(self) -> Path:
        """Train to the last step (or ``stop_at``); return the last checkpoint. Ctrl-C saves, then raises."""
        restore = self._catch_signals()
        bar = tqdm(total=self.total_steps, initial=self.step, unit="step", file=sys.stderr, dynamic_ncols=True,
                   disable=not (self.dist.is_main and self.config.progress))
        try:
            if self._saved_step is None:
                self.log.write({"event": "start", "step": 0, "total_steps": self.total_steps,
                                "pairs": len(self.data.pairs), "world_size": self.dist.world_size})
                if self.refreshing:
                    self._save_checkpoint()  # what the initial refresh (ANCE negatives, eval) reads
            stop = self._boundary()
            self._start_inferencer()
            self.window = Window()
            while not stop and self.step < self.total_steps:
                self._train_step()
                bar.update()
                self._after_step(bar)
                if self.step == self.config.stop_at and self.step < self.total_steps:
                    return self._pause()
                if self.step < self.total_steps:
                    stop = self._boundary()
            if stop:
                self._interrupt()
            return self._finish()
        finally:
            bar.close()
            restore()
            if self.inferencer is not None and self.inferencer.exit_code() is None:
                self.inferencer.stop(drain=False, timeout=STOP_GRACE_S)

    def _catch_signals(self) -> Any:
        """First Ctrl-C (or SIGTERM): stop at the next step boundary with a checkpoint. Second: quit now."""
        if threading.current_thread() is not threading.main_thread():
            return lambda: None

        def handler(signum: int, frame: Any) -> None:
            if self._interrupted:
                raise KeyboardInterrupt
            self._interrupted = True
            if self.dist.is_main:
                _say("stopping after this step with a checkpoint (press Ctrl-C again to quit at once)")

        previous = {s: signal.signal(s, handler) for s in (signal.SIGINT, signal.SIGTERM)}
        return lambda: [signal.signal(s, h) for s, h in previous.items()]

    def _train_step(self) -> None:
        cfg = self.config
        local = cfg.batch_size // self.dist.world_size
        self._staleness = None if self.version is None else self.step - self.version
        self.model.train()
        loss_sum = 0.0
        gathered = False
        for micro in range(cfg.grad_accumulation):
            pairs = [self.data.pairs[i] for i in self.stream.take(cfg.batch_size)]
            groups = [Group(qid, pos, tuple(self.sampler.sample(qid, self.data.exclude[qid], cfg.n_negatives,
                                                                  self.rng)))
                      for qid, pos in pairs]
            mine = groups[self.dist.rank * local:(self.dist.rank + 1) * local]
            batch = self.collator(mine)
            last = micro == cfg.grad_accumulation - 1
            sync = contextlib.nullcontext() if last or not self.dist.enabled else self.model.no_sync()
            with sync:
                with self.precision.autocast():
                    queries, passages = self.model(dict(batch.queries), [dict(p) for p in batch.passages],
                                                   batch.restore)
                loss, factor, gathered = self._loss(queries.float(), passages.float(), groups, mine,
                                                    batch.group_size)
                scaled = loss * factor / cfg.grad_accumulation
                (self.precision.scaler.scale(scaled) if self.precision.scaler else scaled).backward()
            loss_sum += loss.item() / cfg.grad_accumulation
        self._optimizer_step()
        self.step += 1
        self.window.steps += 1
        self.window.examples += cfg.batch_size * cfg.grad_accumulation
        self.window.loss += loss_sum if gathered else self.dist.mean(loss_sum)

    def _loss(self, queries: torch.Tensor, passages: torch.Tensor, groups: list[Group], mine: list[Group],
              group_size: int) -> tuple[torch.Tensor, int, bool]:
        """The loss, the factor its gradient needs under DDP, and whether it covers the whole global batch.

        In-batch negatives with several processes: query and passage vectors of all ranks are gathered, so
        every query sees every passage of the global batch, exactly as in one process.
        """
        in_batch = self.config.in_batch
        if in_batch and self.dist.enabled:
            mask = in_batch_mask(groups, self.data.exclude).to(self.device)
            loss = self.loss_fn(self.dist.gather_with_grad(queries), self.dist.gather_with_grad(passages),
                                group_size, True, mask)
            return loss, self.dist.world_size, True
        mask = in_batch_mask(mine, self.data.exclude).to(self.device) if in_batch else None
        return self.loss_fn(queries, passages, group_size, in_batch, mask), 1, False

    def _optimizer_step(self) -> None:
        scaler = self.precision.scaler
        if scaler is not None:
            scaler.unscale_(self.optimizer)
        for name, params in self.layer_groups.items():
            self.window.add_norm(name, grad_norm(params))
        params = [p for group in self.optimizer.param_groups for p in group["params"]]
        limit = self.config.max_grad_norm or float("inf")
        self.window.add_norm("total", float(torch.nn.utils.clip_grad_norm_(params, limit)))
        self.window.lr = self.optimizer.param_groups[0]["lr"]
        if scaler is not None:
            scaler.step(self.optimizer)
            scaler.update()
        else:
            self.optimizer.step()
        self.scheduler.step()
        self.optimizer.zero_grad(set_to_none=True)

    def _after_step(self, bar: tqdm) -> None:
        if self.inferencer is not None:
            self._check_inferencer()
            self.window.busy_steps += self.inferencer.busy()
        if self.step % self.config.log_every == 0 or self.step == self.total_steps:
            self._log_window(bar)
        cfg = self.config
        if ((cfg.refresh_every and self.step % cfg.refresh_every == 0)
                or (cfg.save_every and self.step % cfg.save_every == 0)
                or self.step in (self.total_steps, cfg.stop_at)):
            self._save_checkpoint()

    def _log_window(self, bar: tqdm) -> None:
        w = self.window
        seconds = time.perf_counter() - w.started
        record = {"step": self.step, "epoch": round(self.stream.epochs_done, 4), "loss": w.loss / w.steps,
                  "lr": w.lr, "grad_norm": w.mean_norm("total"),
                  **{f"grad_norm_{g}": w.mean_norm(g) for g in GROUPS},
                  "examples_per_s": round(w.examples / seconds, 3), "steps_per_s": round(w.steps / seconds, 4),
                  "pause_s": round(w.pause_s, 3), "negatives_version": self.version, "staleness": self._staleness,
                  "inferencer_busy": round(w.busy_steps / w.steps, 3) if self.inferencer else None}
        self.log.write(record)
        bar.set_postfix(loss=f"{record['loss']:.4f}", **({"neg": f"v{self.version}"} if self.version is not None
                                                          else {}))
        self.window = Window()

    # ---- step boundaries ----

    def _boundary(self) -> bool:
        """Between steps: refresh or pick negatives (rank 0), agree on them and on stopping (all ranks)."""
        version = self._choose_negatives() if self.dist.is_main else None
        stop = self._interrupted
        if self.dist.enabled:
            votes = self.dist.all_gather_object((self._interrupted, version))
            stop, version = any(v[0] for v in votes), votes[0][1]
        if version is not None and version != self.version:
            self.sampler.update(version, self.store.load(version))
            self.log.write({"event": "negatives", "step": self.step, "version": version,
                            "staleness": self.step - version})
        return stop

    def _refresh_due(self) -> bool:
        cfg = self.config
        if not self.refreshing:
            return False
        initial = self.sampler.refreshed and self.version is None
        return initial or (cfg.refresh_every > 0 and self.step % cfg.refresh_every == 0)

    def _choose_negatives(self) -> int | None:
        """Rank 0: the negatives version to train the next step on (None: keep what is in use)."""
        initial = self.sampler.refreshed and self.version is None
        if self._refresh_due() and (self.config.refresh_mode == "sync" or initial):
            self._refresh_in_process(self.step)
            return self.step if self.sampler.refreshed else None
        if not (self.sampler.refreshed and self.inferencer is not None):
            return None
        newest = self.store.latest()
        bound = self.config.max_staleness
        if bound is not None and self.step - (newest or 0) > bound and not self._check_inferencer():
            newest = self._wait_for_negatives(self.step - bound)
        return newest if newest is not None and newest > (self.version or 0) else None

    def _wait_for_negatives(self, minimum: int) -> int | None:
        """Rank 0, async with max_staleness: wait until a version >= ``minimum`` is published."""
        waited = time.perf_counter()
        newest = self.store.latest()
        while (newest is None or newest < minimum) and not self._interrupted and not self._check_inferencer():
            time.sleep(STALENESS_POLL_S)
            newest = self.store.latest()
        seconds = time.perf_counter() - waited
        self.window.pause_s += seconds
        self.log.write({"event": "wait", "step": self.step, "seconds": round(seconds, 3), "version": newest})
        return newest

    def _refresh_in_process(self, step: int) -> None:
        """Rank 0: refresh the checkpoint of ``step`` here, unless that was done already (e.g. before a resume)."""
        done = step in self.records.steps() and (not self.sampler.refreshed or self.store.path(step).is_file())
        if done:
            return
        if self._job is None:
            self._job = RefreshJob.from_config(self.config, self.data)
        started = time.perf_counter()
        devices = [self.device.index or 0] if self.device.type == "cuda" else []
        with torch.random.fork_rng(devices=devices):  # training draws the same random numbers either way
            record = refresh_checkpoint(checkpoint_dir(self.run, step), self._job, self.run, self.device, "sync")
        seconds = time.perf_counter() - started
        self.window.pause_s += seconds
        self.log.write({"event": "refresh", "step": step, "seconds": round(seconds, 3),
                        "metrics": record.get("metrics")})
        _say(describe(record))

    def _save_checkpoint(self) -> None:
        started = time.perf_counter()
        rng_states = self.dist.all_gather_object(capture_rng())
        if self.dist.is_main:
            state = {"step": self.step, "optimizer": self.optimizer.state_dict(),
                     "scheduler": self.scheduler.state_dict(),
                     "scaler": self.precision.scaler.state_dict() if self.precision.scaler else None,
                     "data": self.stream.state_dict(), "sampler_rng": self.rng.getstate(), "rng": rng_states,
                     "world_size": self.dist.world_size, "negatives_version": self.version}
            folder = save_checkpoint(self.run, self.step, self.encoder, state)
            prune_checkpoints(self.run, self.config.keep_checkpoints)
            self.log.write({"event": "checkpoint", "step": self.step, "path": str(folder),
                            "seconds": round(time.perf_counter() - started, 3)})
        self.dist.barrier()
        self._saved_step = self.step
        self.window.pause_s += time.perf_counter() - started

    # ---- the inferencer ----

    def _start_inferencer(self) -> None:
        cfg = self.config
        if not (self.dist.is_main and self.refreshing and cfg.refresh_mode == "async" and cfg.refresh_every > 0):
            return
        self.inferencer = InferencerProcess(self.run)
        pid = self.inferencer.start()
        self.log.write({"event": "inferencer_started", "step": self.step, "pid": pid})

    def _check_inferencer(self) -> bool:
        """Rank 0: whether the inferencer has died; says so once (console and log)."""
        code = self.inferencer.exit_code() if self.inferencer else None
        if code is None or self.inferencer.stopping:
            return False
        if not self._death_reported:
            self._death_reported = True
            _say(f"warning: the inferencer (pid {self.inferencer.pid}) exited with code {code} at step "
                 f"{self.step}; training goes on with negatives version {self.version} "
                 f"(see {self.run.inferencer_log})")
            self.log.write({"event": "inferencer_died", "step": self.step, "returncode": code,
                            "negatives_version": self.version})
        return True

    # ---- endings ----

    def _pause(self) -> Path:
        if self.inferencer is not None:
            self.inferencer.stop(drain=False, timeout=STOP_GRACE_S)
        self.log.write({"event": "paused", "step": self.step})
        if self.dist.is_main:
            _say(f"stopped at step {self.step} (stop_at); rerun the same command to continue")
        return checkpoint_dir(self.run, self.step)

    def _interrupt(self) -> None:
        if self._saved_step != self.step:
            self._save_checkpoint()
        if self.inferencer is not None:
            self.inferencer.stop(drain=False, timeout=STOP_GRACE_S)
        self.log.write({"event": "interrupted", "step": self.step})
        if self.dist.is_main:
            _say(f"interrupted at step {self.step}; checkpoint saved; rerun the same command to resume")
        raise KeyboardInterrupt

    def _finish(self) -> Path:
        """The last checkpoint is refreshed too: in process (sync) or by draining the inferencer (async)."""
        if self.dist.is_main and self.refreshing and self.config.refresh_every > 0:
            if self.config.refresh_mode == "sync":
                self._refresh_in_process(self.step)
            elif self.inferencer is not None and not self._check_inferencer():
                _say("waiting for the inferencer to refresh the final checkpoint")
                self.inferencer.stop(drain=True)
            else:
                _say(f"the final checkpoint was not refreshed; run python -m ance_ir.train.inferencer "
                     f"{self.run.root} --once")
        self.log.write({"event": "done", "step": self.step})
        self.dist.barrier()
        return checkpoint_dir(self.run, self.step)


def train(config: TrainConfig, resume: bool = False) -> Path:
    """Run (or resume) the training described by ``config``; return the path of the last checkpoint."""
    trainer = Trainer(config, resume=resume)
    try:
        return trainer.train()
    finally:
        trainer.dist.close()
