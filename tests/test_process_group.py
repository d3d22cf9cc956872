"""Leaving the process group ends gloo's threads, whatever was imported after joining it."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import free_port
from test_train_run import REPO

# joins a one-process gloo group, imports what the commands import after joining (transformers' modeling, and
# torch.distributed.nn, which it imports), leaves, and prints the names of the process's threads
SCRIPT = """
import gc, os
from datetime import timedelta
import torch.distributed as dist
{join}
import transformers.modeling_utils
import torch.distributed.nn
dist.destroy_process_group()
gc.collect()
print(sorted(open(f"/proc/self/task/{{t}}/comm").read().strip() for t in os.listdir("/proc/self/task")))
"""


def _threads_after_leaving(join: str) -> str:
    env = {**os.environ, "PYTHONPATH": str(REPO), "RANK": "0", "WORLD_SIZE": "1", "MASTER_ADDR": "127.0.0.1",
           "MASTER_PORT": str(free_port())}
    done = subprocess.run([sys.executable, "-c", SCRIPT.format(join=join)], cwd=REPO, env=env, capture_output=True,
                          text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]
    return done.stdout.strip().splitlines()[-1]


@pytest.mark.skipif(not Path("/proc/self/task").is_dir(), reason="lists threads through /proc")
def test_leaving_the_group_ends_gloos_threads():
    joined = "from ance_ir.process_group import join_process_group\njoin_process_group('gloo', timedelta(minutes=1))"
    assert "gloo" not in _threads_after_leaving(joined)
    # the control: torch's own call keeps them running (the group outlives destroy_process_group)
    assert "gloo" in _threads_after_leaving("dist.init_process_group('gloo')")
