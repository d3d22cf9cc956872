"""The trainer's handle on the asynchronous inferencer subprocess."""

from __future__ import annotations

import os
import subprocess
import sys

from ance_ir.cli import child_env
from ance_ir.train.layout import RunDir
from ance_ir.train.store import read_status, request_stop

STOP_GRACE_S = 30  # after an interruption, how long the inferencer may take before it is terminated
TERM_GRACE_S = 10  # then how long its SIGTERM handler may take (it runs between Python bytecodes) before a kill


class InferencerProcess:
    """``python -m ance_ir.train.inferencer OUTPUT --parent-pid PID``, in its own session, logging to a file.

    Its own session keeps a terminal's Ctrl-C away from it: the trainer decides when it stops.
    """

    def __init__(self, run: RunDir, poll: float = 0.5):
        self.run, self.poll = run, poll
        self.proc: subprocess.Popen | None = None
        self.stopping = False

    def start(self) -> int:
        """Start the process; return its pid."""
        self.run.inferencer_stop.unlink(missing_ok=True)
        env = child_env()  # run the trainer's own ance_ir
        with open(self.run.inferencer_log, "ab") as log:
            self.proc = subprocess.Popen(
                [sys.executable, "-m", "ance_ir.train.inferencer", str(self.run.root), "--parent-pid",
                 str(os.getpid()), "--poll", str(self.poll)],
                stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, env=env, start_new_session=True)
        return self.proc.pid

    @property
    def pid(self) -> int | None:
        return self.proc.pid if self.proc else None

    def exit_code(self) -> int | None:
        """The exit code once the process has ended, else None."""
        return self.proc.poll() if self.proc else None

    def busy(self) -> bool:
        """Whether it is refreshing a checkpoint right now."""
        status = read_status(self.run)
        return bool(status and status.get("pid") == self.pid and status.get("state") == "refreshing")

    def stop(self, drain: bool, timeout: float | None = None) -> int | None:
        """Ask it to stop (``drain``: after refreshing the newest checkpoint) and wait; return its exit code.

        After ``timeout`` seconds it is terminated.
        """
        if self.proc is None:
            return None
        self.stopping = True
        if self.proc.poll() is None:
            request_stop(self.run, "drain" if drain else "now")
            try:
                self.proc.wait(timeout)
            except subprocess.TimeoutExpired:
                self.proc.terminate()
                try:
                    self.proc.wait(TERM_GRACE_S)
                except subprocess.TimeoutExpired:  # inside a long faiss or numpy call
                    self.proc.kill()
                    self.proc.wait()
        return self.proc.returncode
