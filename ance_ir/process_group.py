"""Joining torchrun's process group so that leaving it really ends it."""

from __future__ import annotations

from datetime import timedelta


def join_process_group(backend: str, timeout: timedelta) -> None:
    """``torch.distributed.init_process_group(backend)`` from torchrun's environment.

    ``torch.distributed.nn`` binds ``group.WORLD`` as the default argument of ten functions when it is imported.
    Imported after the group exists (transformers' modeling imports it), it keeps the group alive after
    ``destroy_process_group``: gloo's threads then still run when the process exits, and now and then abort it
    ("terminate called without an active exception", exit -6, after the command's work was done). Imported
    first, it binds None (the default group at call time).
    """
    import torch.distributed as dist
    import torch.distributed.nn  # noqa: F401  (before the group exists: see above)

    dist.init_process_group(backend, timeout=timeout)
