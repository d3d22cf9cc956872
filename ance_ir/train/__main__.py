"""``python -m ance_ir.train --config FILE.yaml [--flag value ...]``: train (or resume) a dense retriever.

    python -m ance_ir.train --config configs/rag24-mini/bm25-warmup.yaml
    python -m ance_ir.train --config configs/rag24-mini/ance.yaml --refresh-mode sync
    torchrun --nproc_per_node 2 -m ance_ir.train --config configs/rag24-mini/ance.yaml

Rerunning a command whose OUTPUT holds checkpoints continues from the latest one.
"""

from __future__ import annotations

import os
import sys

from ance_ir.cli import run_cli
from ance_ir.train.arguments import parse_args


def main(argv: list[str] | None = None) -> int:
    config, resume = parse_args(argv)

    from ance_ir.train.trainer import train

    checkpoint = train(config, resume=resume)
    if os.environ.get("RANK", "0") == "0":
        print(f"last checkpoint: {checkpoint}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    run_cli(main)
