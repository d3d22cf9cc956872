"""The MiniLM cross-encoder chain of docs/rerank-rag24.md given a GPU's budget (issue 13): ICT negatives as a file.

    python -m experiments.rag24_ce_gpu --per-passage 3 --seed 42 --output train-runs/rag24-mini/ict3.s42.bm25.jsonl.gz

Writes, for each pair that ``data.source: ict`` with ``per_passage`` and ``seed`` trains on (``keep`` 0.1, the
source's default), BM25's top ``--depth`` for its sentence less the pair's own passage: what ``negatives: bm25``
searches when training starts, as a ``negatives: static`` file (``{"qid": "ict-N", "negatives": [...]}`` a line),
so that a machine without Pyserini and Java (the GPU machines lent here) trains on the same negatives. The file's
``--seed`` and ``--per-passage`` must be the training run's: its pairs are matched by position (``ict-0``, ...), so a
file drawn with other ones gives other sentences' negatives without an error.
"""

from __future__ import annotations

import argparse
import json
import tempfile
from pathlib import Path

from ance_ir.bm25 import build_lucene_index
from ance_ir.data import atomic_write
from ance_ir.pretrain_data.ict import ICTSource
from ance_ir.train.negatives import search_bm25_candidates


def ict_negatives(corpus: str, per_passage: int, seed: int, depth: int) -> dict[str, list[str]]:
    """BM25's top ``depth`` for each ICT pair's sentence, the pair's own passage left out, keyed by the pair's id."""
    data = ICTSource.from_settings(corpus, {"per_passage": per_passage}, seed).load()
    with tempfile.TemporaryDirectory() as tmp:
        index = build_lucene_index(data.corpus_path, Path(tmp) / "index")
        return search_bm25_candidates(index, data, depth, Path(tmp) / "candidates", progress=True)


def main() -> None:
    parser = argparse.ArgumentParser(prog="python -m experiments.rag24_ce_gpu", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--corpus", default="rag24-mini")
    parser.add_argument("--per-passage", type=int, default=1, help="ICT pairs drawn per passage (data.per_passage)")
    parser.add_argument("--seed", type=int, default=42, help="the training run's seed (draws the same pairs)")
    parser.add_argument("--depth", type=int, default=100, help="BM25 hits a sentence (negatives.depth)")
    parser.add_argument("--output", required=True, help="negatives JSONL to write (.gz: gzip)")
    args = parser.parse_args()
    import ance_ir.bootstrap  # noqa: F401  (Java for Pyserini)

    negatives = ict_negatives(args.corpus, args.per_passage, args.seed, args.depth)
    with atomic_write(args.output) as f:
        for qid, docids in negatives.items():
            f.write(json.dumps({"qid": qid, "negatives": docids}) + "\n")
    print(f"{len(negatives)} ICT pairs' negatives written to {args.output}")


if __name__ == "__main__":
    main()
