"""The ANCE refresh as a training hook: versioned ANN negatives from the model being trained, and evaluation
of every refreshed checkpoint.

Every ``refresh.every`` steps the trainer saves a checkpoint. In ``sync`` mode this hook refreshes it in
process at the next step boundary (training waits; exactly reproducible). In ``async`` mode an inferencer
process (:mod:`ance_ir.train.inferencer`) refreshes the newest checkpoint while training goes on, and this
hook switches the sampler to each newly published version at a step boundary, waits when the negatives
are older than ``refresh.max_staleness`` steps, and, when the inferencer dies, goes on with the last
negatives and says so once. Any sampler whose ``refreshed`` is true is fed this way (:meth:`update`).
"""

from __future__ import annotations

import time
from typing import TYPE_CHECKING, Any

import torch

from ance_ir.data.resume import say
from ance_ir.train.checkpoint import checkpoint_dir
from ance_ir.train.hooks import TrainingHook
from ance_ir.train.process import STOP_GRACE_S, InferencerProcess
from ance_ir.train.refresh import RefreshJob, describe, refresh_checkpoint, refreshes
from ance_ir.train.store import NegativesStore, RefreshRecords

if TYPE_CHECKING:
    from ance_ir.train.negatives import NegativeSampler
    from ance_ir.train.task import TaskContext

STALENESS_POLL_S = 0.05


class Refresher(TrainingHook):
    """Refreshes and evaluates checkpoints of the run, and feeds ``sampler`` the negatives they give."""

    def __init__(self, ctx: TaskContext, sampler: NegativeSampler):
        self.ctx, self.config, self.run = ctx, ctx.config, ctx.run
        self.sampler, self.log, self.interrupted = sampler, ctx.log, ctx.interrupted
        self.every = self.config.refresh.every
        self.enabled = refreshes(self.config)
        self.store = NegativesStore(self.run.negatives)
        self.records = RefreshRecords(self.run.refresh)
        self.inferencer: InferencerProcess | None = None
        self._job: RefreshJob | None = None
        self._death_reported = False
        self._busy: str | None = None  # what a step boundary waits for, said on Ctrl-C
        self._staleness: int | None = None
        self._pause_s = 0.0
        self._busy_steps = 0

    @property
    def version(self) -> int | None:
        """The negatives version in use, else None."""
        return getattr(self.sampler, "version", None)

    # ---- boundaries ----

    def initial_checkpoint(self) -> bool:
        return self.enabled  # what the initial refresh (ANCE negatives, eval) reads

    def propose(self, step: int) -> int | None:
        """Rank 0: the negatives version to train the next step on (None: keep what is in use)."""
        initial = self.sampler.refreshed and self.version is None
        due = self.enabled and (initial or (self.every > 0 and step % self.every == 0))
        if due and (self.config.refresh.mode == "sync" or initial):
            self._refresh_in_process(step)
            return step if self.sampler.refreshed else None
        if not (self.sampler.refreshed and self.inferencer is not None):
            return None
        newest = self.store.latest()
        bound = self.config.refresh.max_staleness
        if bound is not None and step - (newest or 0) > bound and not self._check_inferencer(step):
            newest = self._wait_for_negatives(step, step - bound)
        return newest if newest is not None and newest > (self.version or 0) else None

    def apply(self, step: int, proposal: int | None) -> None:
        if proposal is not None and proposal != self.version:
            self.sampler.update(proposal, self.store.load(proposal))
            self.log.write({"event": "negatives", "step": step, "version": proposal, "staleness": step - proposal})

    def begin(self, step: int) -> None:
        cfg = self.config.refresh
        if not (self.ctx.dist.is_main and self.enabled and cfg.mode == "async" and self.every > 0):
            return
        self.inferencer = InferencerProcess(self.run)
        pid = self.inferencer.start()
        self.log.write({"event": "inferencer_started", "step": step, "pid": pid})

    def after_step(self, step: int) -> None:
        self._staleness = None if self.version is None else step - 1 - self.version
        if self.inferencer is not None:
            self._check_inferencer(step)
            self._busy_steps += self.inferencer.busy()

    def checkpoint_due(self, step: int) -> bool:
        return bool(self.every and step % self.every == 0)

    def busy(self) -> str | None:
        return self._busy

    def log_fields(self, steps: int) -> dict[str, Any]:
        fields = {"pause_s": self._pause_s, "negatives_version": self.version, "staleness": self._staleness,
                  "inferencer_busy": round(self._busy_steps / steps, 3) if self.inferencer else None}
        self._pause_s, self._busy_steps = 0.0, 0
        return fields

    def state_dict(self) -> dict[str, Any]:
        return {"negatives_version": self.version}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        if state.get("negatives_version") is not None:
            self.sampler.update(state["negatives_version"], self.store.load(state["negatives_version"]))

    # ---- refreshing ----

    def _wait_for_negatives(self, step: int, minimum: int) -> int | None:
        """Rank 0, async with max_staleness: wait until a version >= ``minimum`` is published."""
        waited = time.perf_counter()
        newest = self.store.latest()
        while ((newest is None or newest < minimum) and not self.interrupted()
               and not self._check_inferencer(step)):
            time.sleep(STALENESS_POLL_S)
            newest = self.store.latest()
        seconds = time.perf_counter() - waited
        self._pause_s += seconds
        self.log.write({"event": "wait", "step": step, "seconds": round(seconds, 3), "version": newest})
        return newest

    def _refresh_in_process(self, step: int) -> None:
        """Rank 0: refresh the checkpoint of ``step`` here, unless that was done already (e.g. before a resume)."""
        done = step in self.records.steps() and (not self.sampler.refreshed or self.store.path(step).is_file())
        if done:
            return
        if self._job is None:
            self._job = RefreshJob.from_config(self.config, self.ctx.data)
        started = time.perf_counter()
        device = self.ctx.device
        devices = [device.index or 0] if device.type == "cuda" else []
        self._busy = f"the refresh of step {step}'s checkpoint"
        try:
            with torch.random.fork_rng(devices=devices):  # training draws the same random numbers either way
                record = refresh_checkpoint(checkpoint_dir(self.run, step), self._job, self.run, device, "sync")
        finally:
            self._busy = None
        seconds = time.perf_counter() - started
        self._pause_s += seconds
        self.log.write({"event": "refresh", "step": step, "seconds": round(seconds, 3),
                        "metrics": record.get("metrics")})
        say(describe(record))

    def _check_inferencer(self, step: int) -> bool:
        """Rank 0: whether the inferencer has died; says so once (console and log)."""
        code = self.inferencer.exit_code() if self.inferencer else None
        if code is None or self.inferencer.stopping:
            return False
        if not self._death_reported:
            self._death_reported = True
            say(f"warning: the inferencer (pid {self.inferencer.pid}) exited with code {code} at step "
                 f"{step}; training goes on with negatives version {self.version} "
                 f"(see {self.run.inferencer_log})")
            self.log.write({"event": "inferencer_died", "step": step, "returncode": code,
                            "negatives_version": self.version})
        return True

    # ---- endings ----

    def finish(self, step: int) -> None:
        """The last checkpoint is refreshed too (unless ``refresh.final`` is off): in process (sync) or by draining
        the inferencer (async)."""
        if not (self.ctx.dist.is_main and self.enabled and self.every > 0):
            return
        if not self.config.refresh.final:
            self.stop()
            return
        if self.config.refresh.mode == "sync":
            self._refresh_in_process(step)
        elif self.inferencer is not None and not self._check_inferencer(step):
            say("waiting for the inferencer to refresh the final checkpoint")
            code = self.inferencer.stop(drain=True)
            if code:
                say(f"warning: the inferencer exited with code {code} refreshing the final checkpoint (see "
                     f"{self.run.inferencer_log}); run python -m ance_ir.train.inferencer {self.run.root} --once")
                self.log.write({"event": "inferencer_died", "step": step, "returncode": code,
                                "negatives_version": self.version})
        else:
            say(f"the final checkpoint was not refreshed; run python -m ance_ir.train.inferencer "
                 f"{self.run.root} --once")

    def stop(self) -> None:
        if self.inferencer is not None and self.inferencer.exit_code() is None:
            self.inferencer.stop(drain=False, timeout=STOP_GRACE_S)
