"""Open an ance-ir dense index in Pyserini's ``FaissSearcher`` and compare its top-k with an ance-ir run.

    python -m bench.pyserini_parity --index indexes/rag24-mini.minilm --topics rag24-mini-test \\
        --run runs/rag24/minilm.test.trec
"""

from __future__ import annotations

import argparse

import numpy as np

from ance_ir.cli import hidden_alias, positive_int
from ance_ir.data import read_run
from ance_ir.datasets import resolve_topics
from ance_ir.index import load_dense_index
from ance_ir.search import encoder_for_index


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--index", required=True)
    parser.add_argument("--topics", required=True)
    parser.add_argument("--run", required=True, help="run written by python -m ance_ir.search on the same index")
    parser.add_argument("--hits", dest="k", type=positive_int, default=10, help="hits per query")
    hidden_alias(parser, "--k", dest="k", type=positive_int)  # the old spelling
    args = parser.parse_args()

    from pyserini.search.faiss import FaissSearcher

    from ance_ir.modeling.pyserini_adapters import AnceIrQueryEncoder

    topics, ours = resolve_topics(args.topics), read_run(args.run)
    encoder = AnceIrQueryEncoder(encoder_for_index(load_dense_index(args.index), None))
    theirs = FaissSearcher(args.index, encoder).batch_search(list(topics.values()), list(topics), k=args.k, threads=2)
    same = sum([h.docid for h in theirs[q]] == [d for d, _ in ours[q][:args.k]] for q in topics)
    gap = max(abs(float(h.score) - s) for q in topics for h, (_, s) in zip(theirs[q], ours[q], strict=False))
    print(f"{same}/{len(topics)} queries have the same top-{args.k} in FaissSearcher and ance_ir.search; "
          f"largest score difference {gap:.2e} (run files keep 6 decimals)")
    if same != len(topics) or not np.isfinite(gap):
        raise SystemExit(1)


if __name__ == "__main__":
    main()
