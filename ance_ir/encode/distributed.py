"""``torchrun --nproc_per_node N -m ance_ir.encode ...``: one shard per rank, merged by rank 0.

Rank ``r`` of ``N`` encodes :class:`Shard` ``(r, N)`` into ``OUTPUT.shards/r-of-N`` (resumable like any
shard: rerunning the same command reuses finished shards and finished chunks). All ranks then meet in one
``gloo`` collective that also carries their errors; if every shard was written, rank 0 merges them into
``OUTPUT`` with :func:`~ance_ir.index.merge_indexes` and removes ``OUTPUT.shards``. The result is the index
a one-process run writes (same docids in corpus order, same ``meta.json`` fields, and the same vectors to float
rounding at fp32; at int8 or bf16 a passage's vector depends on its batch-mates, which a shard's chunks
group differently).
"""

from __future__ import annotations

import json
import os
import shutil
import sys
from dataclasses import dataclass
from datetime import timedelta
from pathlib import Path
from typing import TYPE_CHECKING, TypeVar

from ance_ir.cli import CLI_ERRORS, error_message
from ance_ir.data import atomic_write, sha256_file
from ance_ir.encode.corpus_encoder import Shard

if TYPE_CHECKING:
    from collections.abc import Callable

    import torch

    from ance_ir.index import DenseIndex

T = TypeVar("T")

# the slowest shard can finish long after the fastest; the wait is for it, not for a dead peer (torchrun
# stops every rank when one dies)
TIMEOUT = timedelta(days=1)


@dataclass(frozen=True)
class Launch:
    """This process's place in a ``torchrun`` launch (``WORLD_SIZE``, ``RANK``, ``LOCAL_RANK``)."""

    rank: int
    world_size: int
    local_rank: int

    @classmethod
    def from_env(cls) -> Launch | None:
        """The launch torchrun describes in the environment, or None for a single process."""
        world = os.environ.get("WORLD_SIZE", "1")
        if not world.isdigit():
            raise ValueError(f"environment WORLD_SIZE={world!r} is not a number")
        if int(world) <= 1:
            return None
        names = ("RANK", "LOCAL_RANK")
        values = {n: os.environ.get(n, "") for n in names}
        bad = [f"{n}={v!r}" for n, v in values.items() if not v.isdigit()]
        if bad:
            raise ValueError(f"WORLD_SIZE={world} but {', '.join(bad)}: launch with torchrun")
        return cls(int(values["RANK"]), int(world), int(values["LOCAL_RANK"]))

    @property
    def shard(self) -> Shard:
        return Shard(self.rank, self.world_size)


def shards_folder(output: str | Path) -> Path:
    """Where the ranks of a torchrun encoding of ``output`` write their shards: ``OUTPUT.shards``."""
    output = Path(output)
    return output.with_name(output.name + ".shards")


def shard_output(output: str | Path, shard: Shard) -> Path:
    return shards_folder(output) / f"{shard.index}-of-{shard.count}"


def finished_shard(folder: Path, shard: Shard, corpus: Path, encoder_name: str, encoder: torch.nn.Module,
                   batch_size: int, chunk_size: int) -> bool:
    """Whether ``folder`` holds this very shard (same corpus, encoder and its weights, settings, precision, batch and
    chunk sizes and kind of device: at bf16 or int8 a passage's vector depends on its batch-mates) from an earlier
    attempt. The corpus and the weights are hashed only when everything else matches."""
    from ance_ir.index.records import index_record
    from ance_ir.modeling.inference import model_precision, weights_sha256

    meta = index_record(folder)
    if meta is None:
        return False
    recorded = meta.get("shard") or {}
    encoded = {"index": shard.index, "count": shard.count, "batch_size": batch_size, "chunk_size": chunk_size,
               "device": encoder.device.type}
    return all(recorded.get(k) == v for k, v in encoded.items()) and \
        meta.get("encoder") == encoder_name and meta.get("encoder_config") == encoder.config.to_dict() and \
        meta.get("precision") == model_precision(encoder) and (folder / "vectors.npy").is_file() and \
        meta.get("corpus_sha256") == sha256_file(corpus) and meta.get("weights_sha256") == weights_sha256(encoder)


def run_ranks(launch: Launch, prepare: Callable[[], T], encode_shard: Callable[[T], None],
              merge: Callable[[], DenseIndex]) -> DenseIndex | None:
    """``prepare`` on rank 0 (e.g. fetch the corpus), its result to every rank, ``encode_shard(result)`` on
    every rank, then ``merge`` on rank 0 while the others wait. Returns rank 0's merged index, None on the other
    ranks.

    A bad-input error (``error:``-type, see :data:`ance_ir.cli.CLI_ERRORS`) on any rank reaches every rank
    through the collectives: rank 0 prints its ``error:`` line, so it appears once, and every rank exits 2.
    """
    import torch.distributed as dist

    from ance_ir.process_group import join_process_group

    join_process_group("gloo", TIMEOUT)
    try:
        message, prepared = None, None
        if launch.rank == 0:
            message, prepared = _attempt(prepare)
        shared = [message, prepared]
        dist.broadcast_object_list(shared, src=0)
        _raise_first(launch, [shared[0]])
        messages: list[str | None] = [None] * launch.world_size
        dist.all_gather_object(messages, _attempt(lambda: encode_shard(shared[1]))[0])
        _raise_first(launch, messages)
        # the merge's outcome is a collective too, so that a failed merge makes every rank exit 2
        message, merged = _attempt(merge) if launch.rank == 0 else (None, None)
        dist.all_gather_object(messages, message)
        _raise_first(launch, messages)
        return merged
    finally:
        dist.destroy_process_group()


def _attempt(step: Callable[[], T]) -> tuple[str | None, T | None]:
    """``(None, result)``, or ``(the error: line's text, None)`` for a bad-input error."""
    try:
        return None, step()
    except CLI_ERRORS as e:
        return error_message(e), None


def _raise_first(launch: Launch, messages: list[str | None]) -> None:
    """On a failure, rank 0 prints the first one as run_cli would; every rank then exits 2 together (a rank
    that exits first makes torchrun stop the others, maybe before rank 0 has printed)."""
    import torch.distributed as dist

    failed = [m for m in messages if m is not None]
    if failed:
        if launch.rank == 0:
            print(f"error: {failed[0]}", file=sys.stderr, flush=True)
        dist.barrier()
        sys.exit(2)


def merge_shards(output: Path, launch: Launch, index_type: str, show_progress: bool = False) -> DenseIndex:
    """Merge the ranks' shards into ``output`` with a one-process run's ``meta.json`` (a bar with
    ``show_progress``); drop the shards."""
    from ance_ir.index import META_FILE, load_dense_index, merge_indexes

    folder = shards_folder(output)
    merge_indexes([shard_output(output, Shard(r, launch.world_size)) for r in range(launch.world_size)],
                  output, index_type, show_progress)
    meta_path = output / META_FILE
    meta = json.loads(meta_path.read_text(encoding="utf-8"))
    meta.pop("merged_from", None)
    meta["shard"] = None
    with atomic_write(meta_path) as f:
        f.write(json.dumps(meta, indent=2) + "\n")
    shutil.rmtree(folder)
    return load_dense_index(output)
