"""``python -m ance_ir.train.inferencer OUTPUT``: ANCE's asynchronous inferencer for a training run.

    python -m ance_ir.train.inferencer train-runs/rag24-mini/ance          # follow the run until its trainer stops it
    python -m ance_ir.train.inferencer train-runs/rag24-mini/ance --once   # refresh the newest checkpoint, then exit

It loops: take the newest complete checkpoint newer than the last one refreshed (older ones are skipped; a
``save_every`` or pause checkpoint counts too, so that a resumed run waiting on ``max_staleness`` always gets one),
refresh it (:func:`ance_ir.train.refresh.refresh_checkpoint`), publish. A refresh that an earlier inferencer left
unfinished (killed, crashed, preempted) is finished first, from the passages it encoded, while its checkpoint is
kept; ``--once`` takes the newest checkpoint alone. It stops when
``OUTPUT/inferencer.stop`` appears (``drain``: after refreshing the newest checkpoint; ``now``: before starting
another refresh) or, when given ``--parent-pid``, when that trainer process is gone; a stop request left from an
earlier run does not stop one started by hand. ``OUTPUT/inferencer.json`` tells what it is doing. The trainer
starts it by itself in ``refresh_mode: async``.
"""

from __future__ import annotations

import os
import sys
import time
from pathlib import Path

import torch
from transformers.utils import logging as hf_logging

from ance_ir.cli import ArgumentParser, positive_float, run_cli
from ance_ir.modeling.inference import resolve_device
from ance_ir.train.arguments import TrainConfig
from ance_ir.train.checkpoint import latest_checkpoint, list_checkpoints, step_of
from ance_ir.train.layout import RunDir
from ance_ir.train.refresh import RefreshJob, describe, refresh_checkpoint, resumable_encoding
from ance_ir.train.store import EncodingWork, RefreshRecords, read_stop, write_status


def serve(output: str | Path, once: bool = False, parent_pid: int | None = None, poll: float = 0.5,
          device: str | None = None) -> int:
    """Refresh checkpoints of the run in ``output`` as they appear; return how many were refreshed."""
    run = RunDir(Path(output))
    hf_logging.disable_progress_bar()
    config = TrainConfig.load(run.config)  # imports the run's plugins too
    job = RefreshJob.from_config(config)
    if not (job.mine or job.eval_topics):
        print(f"{run.root}: nothing to refresh (no ANCE negatives, no eval_topics)", file=sys.stderr)
        return 0
    target = resolve_device(device or config.refresh.device or config.device, local_rank=0)
    if config.refresh.threads:
        torch.set_num_threads(config.refresh.threads)
    done = max(RefreshRecords(run.refresh).steps(), default=-1)
    if parent_pid is None and run.inferencer_stop.exists():
        print(f"ignoring {run.inferencer_stop}, a stop request left by an earlier run", file=sys.stderr)
        run.inferencer_stop.unlink(missing_ok=True)
    count = 0
    while True:
        stop = read_stop(run)
        if stop == "now":
            break
        if parent_pid is not None and os.getppid() != parent_pid:
            print("the trainer is gone; stopping", file=sys.stderr)
            break
        checkpoint = (None if once else unfinished_checkpoint(run, done, job, target)) or latest_checkpoint(run)
        if checkpoint is not None and step_of(checkpoint) > done:
            write_status(run, "refreshing", step_of(checkpoint))
            try:
                record = refresh_checkpoint(checkpoint, job, run, target, "async")
            except (OSError, ValueError) as e:
                write_status(run, "idle", done)
                if checkpoint.exists():
                    raise
                print(f"warning: the refresh of {checkpoint.name} failed ({e}); its checkpoint is gone (pruned by "
                      "keep_checkpoints while it was refreshed), taking the next newest", file=sys.stderr, flush=True)
                continue
            done, count = record["step"], count + 1
            write_status(run, "idle", done)
            print(describe(record), file=sys.stderr, flush=True)
            if not once:
                continue
        elif once and checkpoint is not None:
            print(f"checkpoint {checkpoint.name} is already refreshed", file=sys.stderr)
        if once or stop == "drain":
            break
        time.sleep(poll)
    write_status(run, "stopped", done)
    return count


def unfinished_checkpoint(run: RunDir, done: int, job: RefreshJob, device: torch.device) -> Path | None:
    """The newest checkpoint after step ``done`` whose refresh was left unfinished with passages encoded that a
    refresh by ``job`` on ``device`` reuses, or None."""
    work = EncodingWork(run.refresh)
    unfinished = {s for s in work.steps() if resumable_encoding(work.path(s), job, device)}
    return next((c for c in reversed(list_checkpoints(run)) if step_of(c) > done and step_of(c) in unfinished), None)


def main(argv: list[str] | None = None) -> int:
    parser = ArgumentParser(prog="python -m ance_ir.train.inferencer", description=__doc__)
    parser.add_argument("output", help="the training run folder (holds config.json and checkpoints/)")
    parser.add_argument("--once", action="store_true", help="refresh the newest checkpoint if needed, then exit")
    parser.add_argument("--parent-pid", type=int, help="exit when this process (the trainer) is gone")
    parser.add_argument("--poll", type=positive_float, default=0.5, help="seconds between looks for a new checkpoint")
    parser.add_argument("--device", help="cpu, cuda or cuda:N (default: the run's inferencer_device/device)")
    args = parser.parse_args(argv)
    serve(args.output, once=args.once, parent_pid=args.parent_pid, poll=args.poll, device=args.device)
    return 0


if __name__ == "__main__":
    run_cli(main)
