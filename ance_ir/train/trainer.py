"""The training loop: batches and loss from a training task, AdamW, checkpoints, exact resume and logging.

Step boundaries are where everything but the optimizer happens: checkpoints, the task's hooks (e.g. the
ANCE refresh, :mod:`ance_ir.train.refresher`), reacting to Ctrl-C. Under torchrun every rank trains on its
own slice of the same global batch (the task decides how); rank 0 alone writes files, and tells the other
ranks what the hooks decided at each boundary.
"""

from __future__ import annotations

import contextlib
import math
import random
import shutil
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

from ance_ir.cli import check_output, interruption
from ance_ir.data import atomic_directory, output_lock
from ance_ir.data.resume import say
from ance_ir.modeling.kinds import load_model
from ance_ir.modeling.resolve import require_local_model
from ance_ir.plugins import load_plugins
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
from ance_ir.train.dataset import TrainData
from ance_ir.train.distributed import Distributed
from ance_ir.train.inputs import check_inputs, named_paths, record_inputs
from ance_ir.train.layout import RunDir
from ance_ir.train.model_card import write_model_card
from ance_ir.train.modeling import GROUPS, grad_norm, layer_groups
from ance_ir.train.optim import Precision, build_optimizer, linear_schedule
from ance_ir.train.refresh import eval_set, refreshes
from ance_ir.train.runlog import RunLog
from ance_ir.train.task import TASKS, TaskContext, build_task

# fp16 training stops when its loss scale falls below this: gradients that overflow even scaled down mean divergence
MIN_LOSS_SCALE = 1.0


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
    skipped: int = 0  # fp16 steps the loss scaler skipped (gradients not finite): no norms of theirs are kept

    def add_norm(self, name: str, value: float | None) -> None:
        if value is not None:
            self.norms.setdefault(name, []).append(value)

    def mean_norm(self, name: str) -> float | None:
        values = self.norms.get(name)
        return sum(values) / len(values) if values else None

    def state(self) -> dict[str, Any]:
        """What a checkpoint keeps of the window, so that a run resumed mid-window logs what it would have."""
        return {"steps": self.steps, "examples": self.examples, "loss": self.loss, "norms": self.norms, "lr": self.lr,
                "skipped": self.skipped}


def device_passage_buckets(device: torch.device | str) -> int:
    """A new run's ``passage_buckets`` on ``device``: on a CPU, 4 length-sorted sub-batches pad less; on a GPU one
    batch is faster (fewer kernel launches, docs/bench.md)."""
    return 1 if torch.device(device).type == "cuda" else 4


class Trainer:
    """One training run in ``config.output``, resumed from its latest checkpoint when there is one."""

    def __init__(self, config: TrainConfig, resume: bool = False):
        self.config = config
        load_plugins(config.imports)
        self.run = RunDir(Path(config.output))
        hf_logging.disable_progress_bar()  # one progress bar: the trainer's
        if config.threads:
            torch.set_num_threads(config.threads)
        self.dist = Distributed.init(config.device)
        self._lock = contextlib.ExitStack()  # rank 0's hold on the run folder: one trainer at a time
        try:
            if self.dist.is_main:
                check_output(self.run.root, folder=True)
                self._lock.enter_context(output_lock(self.run.root))
            self._start(config, resume)
        except BaseException:
            self.close()
            raise

    def _start(self, config: TrainConfig, resume: bool) -> None:
        """The rest of ``__init__``: the run folder prepared, then everything :meth:`_setup` loads."""
        self.device = self.dist.device
        self.precision = Precision(config.optim.precision, self.device)
        if config.task.batch_size % self.dist.world_size:
            raise ValueError(f"batch_size {config.task.batch_size} must be divisible by the number of processes "
                             f"({self.dist.world_size})")
        self.log = RunLog(self.run.log, enabled=self.dist.is_main)
        start = latest_checkpoint(self.run)
        if resume and start is None:
            raise ValueError(f"{self.run.root}: no checkpoint to resume from")
        if config.task.passage_buckets is None and TASKS[config.task.name].reads_setting("passage_buckets"):
            config.task.passage_buckets = self._default_passage_buckets(start)
        fresh = start is None and not self.run.root.exists()
        if self.dist.is_main:
            self._prepare_output(start)
        self.dist.barrier()
        try:
            self._setup(start)
        except BaseException as error:
            if fresh and self.dist.is_main:
                self._remove_failed_start(interrupted=isinstance(error, KeyboardInterrupt))
            raise

    def _remove_failed_start(self, interrupted: bool) -> None:
        """A new run that failed while setting up leaves no half-made folder behind (bad data or model), but an
        interrupted one keeps the candidate rankings it retrieved and the BM25 index it built, which its rerun goes
        on from (as the interrupt's message says)."""
        kept = [p for p in (self.run.candidates, self.run.bm25_index) if interrupted and p.exists()]
        if not kept:
            shutil.rmtree(self.run.root, ignore_errors=True)
            return
        for path in self.run.root.iterdir():
            if path not in kept:
                shutil.rmtree(path) if path.is_dir() else path.unlink()

    def _setup(self, start: Path | None) -> None:
        """Load the data, the model (from ``start`` when resuming), the task, the optimizer and schedule."""
        config = self.config
        if self.dist.is_main:  # first, so that a dataset is fetched once
            self.data = TrainData.load(config, show_progress=config.progress)
            if refreshes(config):
                eval_set(config.refresh, self.data.docids)  # bad eval topics or qrels fail now, not at a refresh
            elif config.refresh.eval_topics:  # not read, nor fetched
                say(f"note: refresh.every is 0: {config.refresh.eval_topics} is not evaluated while training "
                    "(--refresh-every N evaluates every N steps)")
        self.dist.barrier()
        if not self.dist.is_main:
            self.data = TrainData.load(config)
        random.seed(config.seed)
        np.random.seed(config.seed)
        torch.manual_seed(config.seed + self.dist.rank)  # dropout masks differ between ranks
        model = config.model
        if start is not None:
            self.model = load_model(start, model.kind)
        else:
            if model.init_from:
                source = resolve_init(model.init_from)
            else:
                require_local_model(model.name, "model.name (--model)")
                source = model.name
            self.model = load_model(source, model.kind, **model.overrides())
        self.model.to(self.device)
        self._stop_signal: int | None = None  # the first Ctrl-C or SIGTERM, once one came
        context = TaskContext(config, self.data, self.run, self.dist, self.device, self.log,
                              lambda: self._interrupted)
        self.task = build_task(context, self.model)
        self.hooks = self.task.hooks()
        module = self.task.module
        self.module: torch.nn.Module = module
        if self.dist.enabled:
            ids = [self.device.index] if self.device.type == "cuda" else None
            self.module = DistributedDataParallel(module, device_ids=ids)
        self.layer_groups = layer_groups(module)
        optim = config.optim
        self.optimizer = build_optimizer(module, optim.lr, optim.weight_decay)
        global_batch = config.task.batch_size * optim.grad_accumulation
        self.total_steps = optim.max_steps or math.ceil(optim.epochs * self.task.examples / global_batch)
        warmup = optim.warmup_steps or round(optim.warmup_ratio * self.total_steps)
        self.scheduler = linear_schedule(self.optimizer, warmup, self.total_steps)
        self.step = 0
        self._saved_step: int | None = None
        self.window = Window()
        if start is not None:
            self._restore(start)

    def _default_passage_buckets(self, start: Path | None) -> int:
        """A resumed run keeps its recorded value; a new one takes :func:`device_passage_buckets`."""
        if start is not None:
            return self._saved_config().task.passage_buckets
        return device_passage_buckets(self.device)

    def _saved_config(self) -> TrainConfig:
        """The run folder's ``config.json``; one recorded before ``passage_buckets`` existed ran one passage batch
        (where the task reads it)."""
        saved = TrainConfig.load(self.run.config)
        if saved.task.passage_buckets is None and TASKS[saved.task.name].reads_setting("passage_buckets"):
            saved.task.passage_buckets = 1
        return saved

    def _prepare_output(self, start: Path | None) -> None:
        """Rank 0: write or check ``config.json`` and ``inputs.json`` (the input files' fingerprints: a resume reads
        the same data); clean up after a killed run. A new run in a folder without a
        checkpoint first removes what an earlier attempt there made (its log, negatives, refresh records, final
        model), which it would otherwise append to or reuse, except a path a setting names (a start model or
        groups file kept in the folder). Its own BM25 index stays, rebuilt when the corpus is newer."""
        self.run.root.mkdir(parents=True, exist_ok=True)
        if start is None:
            named = [p.resolve() for p in named_paths(self.config)]
            stale = [p for p in (self.run.log, self.run.negatives, self.run.refresh, self.run.final,
                                 self.run.inferencer_status, self.run.inferencer_stop, self.run.inferencer_log,
                                 self.run.checkpoints)
                     if p.exists() and not any(n == p.resolve() or p.resolve() in n.parents for n in named)]
            for path in stale:
                shutil.rmtree(path) if path.is_dir() else path.unlink()
            if stale:
                say(f"{self.run.root}: no checkpoint to resume from; removed what an earlier attempt left: "
                     + ", ".join(p.name for p in stale))
            self.config.save(self.run.config)
            record_inputs(self.config, self.run.inputs)
            return
        changed = check_resumable(self._saved_config(), self.config, self.run.config)
        if self.run.inputs.is_file():
            check_inputs(self.config, self.run.inputs)
        else:  # a run started before inputs were recorded: from now on
            record_inputs(self.config, self.run.inputs)
        if changed:
            say(f"resuming with new {', '.join(changed)}")
            self.config.save(self.run.config)
        remove_partial(self.run)

    def _restore(self, folder: Path) -> None:
        state = load_trainer_state(folder)
        self.optimizer.load_state_dict(state["optimizer"])
        self.scheduler.load_state_dict(state["scheduler"])
        if self.precision.scaler is not None and state.get("scaler"):
            self.precision.scaler.load_state_dict(state["scaler"])
        self.step = self._saved_step = state["step"]
        self.task.load_state_dict(state)
        if len(state["rng"]) == self.dist.world_size:
            restore_rng(state["rng"][self.dist.rank])
        elif self.dist.is_main:
            say(f"warning: {folder} was saved by {len(state['rng'])} processes, this run has "
                 f"{self.dist.world_size}; random states are not restored exactly")
        for hook in self.hooks:
            hook.load_state_dict(state)
        self.window = Window(**state.get("log_window", {}))  # a checkpoint taken mid-window keeps what it began
        self.log.rewind(self.step)
        self.log.write({"event": "resume", "step": self.step, "checkpoint": str(folder),
                        **{k: v for hook in self.hooks for k, v in hook.state_dict().items()}})
        if self.dist.is_main:
            say(f"resuming from {folder}")

    # ---- the loop ----

    def close(self) -> None:
        """Leave the process group and release the run folder."""
        self.dist.close()
        self._lock.close()

    def train(self) -> Path:
        """Train to the last step (or ``stop_at``); return the last checkpoint. Ctrl-C saves, then raises."""
        restore = self._catch_signals()
        bar = tqdm(total=self.total_steps, initial=self.step, unit="step", file=sys.stderr, dynamic_ncols=True,
                   disable=not (self.dist.is_main and self.config.progress))
        try:
            if self._saved_step is None:
                self.log.write({"event": "start", "step": 0, "total_steps": self.total_steps,
                                "pairs": self.task.examples, "world_size": self.dist.world_size})
                for record in self.task.start_events():
                    self.log.write(record)
                if any(hook.initial_checkpoint() for hook in self.hooks):
                    self._save_checkpoint()
            stop = self._boundary()
            for hook in self.hooks:
                hook.begin(self.step)
            self.window = Window(**self.window.state())  # a fresh clock: setup and step 0's checkpoint not timed
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
            for hook in self.hooks:
                hook.stop()

    @property
    def _interrupted(self) -> bool:
        return self._stop_signal is not None

    def _catch_signals(self) -> Any:
        """First Ctrl-C (or SIGTERM): stop at the next step boundary with a checkpoint. Second: quit now."""
        if threading.current_thread() is not threading.main_thread():
            return lambda: None

        def handler(signum: int, frame: Any) -> None:
            if self._interrupted:
                raise interruption(signum)
            self._stop_signal = signum
            if self.dist.is_main:
                doing = next((what for hook in self.hooks if (what := hook.busy())), "this step")
                say(f"stopping after {doing} with a checkpoint (a second Ctrl-C or SIGTERM quits at once)")

        previous = {s: signal.signal(s, handler) for s in (signal.SIGINT, signal.SIGTERM)}
        return lambda: [signal.signal(s, h) for s, h in previous.items()]

    def _train_step(self) -> None:
        accumulation = self.config.optim.grad_accumulation
        self.module.train()
        loss_sum = 0.0
        whole = False
        for micro in range(accumulation):
            batch = self.task.next_batch()
            last = micro == accumulation - 1
            sync = contextlib.nullcontext() if last or not self.dist.enabled else self.module.no_sync()
            with sync:
                out = self.task.loss(self.module, batch, self.precision.autocast)
                scaled = out.loss * out.factor / accumulation
                (self.precision.scaler.scale(scaled) if self.precision.scaler else scaled).backward()
            loss_sum += out.loss.item() / accumulation
            whole = out.whole_batch
        self._optimizer_step()
        self.step += 1
        self.window.steps += 1
        self.window.examples += self.config.task.batch_size * accumulation
        self.window.loss += loss_sum if whole else self.dist.mean(loss_sum)

    def _optimizer_step(self) -> None:
        scaler = self.precision.scaler
        if scaler is not None:
            scaler.unscale_(self.optimizer)
        norms = {name: grad_norm(params) for name, params in self.layer_groups.items()}
        params = [p for group in self.optimizer.param_groups for p in group["params"]]
        limit = self.config.optim.max_grad_norm or float("inf")
        total = float(torch.nn.utils.clip_grad_norm_(params, limit))
        diverged = (f"the learning rate ({self.config.optim.lr}) or the data made training diverge")
        if math.isfinite(total):
            for name, norm in {**norms, "total": total}.items():
                self.window.add_norm(name, norm)
        elif scaler is None:
            raise RuntimeError(f"step {self.step + 1}: the gradient norm is {total}; {diverged}")
        else:  # fp16: the scaler skips this step and halves its scale
            self.window.skipped += 1
        self.window.lr = self.optimizer.param_groups[0]["lr"]
        if scaler is not None:
            scaler.step(self.optimizer)
            scaler.update()
            if scaler.get_scale() < MIN_LOSS_SCALE:
                raise RuntimeError(f"step {self.step + 1}: the gradients overflow fp16 even at a loss scale of "
                                   f"{scaler.get_scale():g}; {diverged}")
        else:
            self.optimizer.step()
        self.scheduler.step()
        self.optimizer.zero_grad(set_to_none=True)

    def _after_step(self, bar: tqdm) -> None:
        for hook in self.hooks:
            hook.after_step(self.step)
        cfg = self.config
        if self.step % cfg.log_every == 0 or self.step == self.total_steps:
            self._log_window(bar)
        if (any(hook.checkpoint_due(self.step) for hook in self.hooks)
                or (cfg.save_every and self.step % cfg.save_every == 0)
                or self.step in (self.total_steps, cfg.stop_at)):
            self._save_checkpoint()

    def _log_window(self, bar: tqdm) -> None:
        w = self.window
        seconds = time.perf_counter() - w.started
        extra: dict[str, Any] = {}
        for hook in self.hooks:
            extra.update(hook.log_fields(w.steps))
        pause = w.pause_s + extra.pop("pause_s", 0.0)
        record = {"step": self.step, "epoch": round(self.task.epochs_done, 4), "loss": w.loss / w.steps,
                  "lr": w.lr, "grad_norm": w.mean_norm("total"),
                  **{f"grad_norm_{g}": w.mean_norm(g) for g in GROUPS},
                  "examples_per_s": round(w.examples / seconds, 3), "steps_per_s": round(w.steps / seconds, 4),
                  "pause_s": round(pause, 3), **extra}
        if self.precision.scaler is not None:
            record |= {"loss_scale": self.precision.scaler.get_scale(), "skipped_steps": w.skipped}
        self.log.write(record)
        version = record.get("negatives_version")
        bar.set_postfix(loss=f"{record['loss']:.4f}", **({"neg": f"v{version}"} if version is not None else {}))
        self.window = Window()

    # ---- step boundaries ----

    def _boundary(self) -> bool:
        """Between steps: the hooks propose (rank 0), every rank agrees on their proposals and on stopping."""
        proposals = [hook.propose(self.step) for hook in self.hooks] if self.dist.is_main else []
        stop = self._interrupted
        if self.dist.enabled:
            votes = self.dist.all_gather_object((self._interrupted, proposals))
            stop, proposals = any(v[0] for v in votes), votes[0][1]
        for hook, proposal in zip(self.hooks, proposals, strict=True):
            hook.apply(self.step, proposal)
        return stop

    def _save_checkpoint(self) -> None:
        started = time.perf_counter()
        rng_states = self.dist.all_gather_object(capture_rng())
        if self.dist.is_main:
            state = {"step": self.step, "optimizer": self.optimizer.state_dict(),
                     "scheduler": self.scheduler.state_dict(),
                     "scaler": self.precision.scaler.state_dict() if self.precision.scaler else None,
                     **self.task.state_dict(), "rng": rng_states, "world_size": self.dist.world_size,
                     "log_window": self.window.state()}
            for hook in self.hooks:
                state.update(hook.state_dict())
            folder = save_checkpoint(self.run, self.step, self.model, state)
            prune_checkpoints(self.run, self.config.keep_checkpoints)
            self.log.write({"event": "checkpoint", "step": self.step, "path": str(folder),
                            "seconds": round(time.perf_counter() - started, 3)})
        self.dist.barrier()
        self._saved_step = self.step
        self.window.pause_s += time.perf_counter() - started

    # ---- endings ----

    def _pause(self) -> Path:
        for hook in self.hooks:
            hook.stop()
        self.log.write({"event": "paused", "step": self.step})
        if self.dist.is_main:
            say(f"stopped at step {self.step} (stop_at); rerun the same command to continue")
        return checkpoint_dir(self.run, self.step)

    def _interrupt(self) -> None:
        if self._saved_step != self.step:
            self._save_checkpoint()
        for hook in self.hooks:
            hook.stop()
        self.log.write({"event": "interrupted", "step": self.step})
        message = f"interrupted at step {self.step}; checkpoint saved; rerun the same command to resume"
        raise interruption(self._stop_signal)(message if self.dist.is_main else "")

    def _finish(self) -> Path:
        """Let the hooks finish (e.g. refresh the last checkpoint), then write the model to ``final/``."""
        for hook in self.hooks:
            hook.finish(self.step)
        if self.dist.is_main:
            with atomic_directory(self.run.final) as tmp:
                self.model.save_pretrained(tmp)
                write_model_card(tmp, self.run)
        self.log.write({"event": "done", "step": self.step})
        self.dist.barrier()
        return checkpoint_dir(self.run, self.step)


def train(config: TrainConfig, resume: bool = False) -> Path:
    """Run (or resume) the training described by ``config``; return the path of the last checkpoint."""
    trainer = Trainer(config, resume=resume)
    try:
        return trainer.train()
    finally:
        trainer.close()
