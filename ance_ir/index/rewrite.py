"""An impact index's passages rewritten as text for BM25: ``python -m ance_ir.index.rewrite``.

    python -m ance_ir.index.rewrite --index indexes/rag24-mini.deepct --output corpus/rag24-mini.deepct.jsonl
    python -m ance_ir.bm25 index --corpus corpus/rag24-mini.deepct.jsonl --output indexes/rag24-mini.deepct.lucene

DeepCT's own setup (Dai and Callan, 2020): a passage becomes each of its terms repeated as many times as its integer
impact (``round(scale * weight)``, the term frequency DeepCT predicts), terms without impact dropped, and BM25 (with
its IDF and length normalisation, k1 and b tuned) searches the rewritten collection. Written as a JSONL corpus
(``id``, ``contents``) in the impact index's passage order, atomically.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Iterator, Mapping
from pathlib import Path

from ance_ir.cli import ArgumentParser, check_apart, check_output, run_cli
from ance_ir.data import InputError
from ance_ir.data.atomic import atomic_write
from ance_ir.data.resume import slow_bar
from ance_ir.index.impact import COLLECTION, check_vector_collection, read_meta


def repeated_terms(vector: Mapping[str, int]) -> str:
    """The text whose term frequencies are ``vector``'s impacts: each term repeated that many times."""
    return " ".join(" ".join([term] * impact) for term, impact in vector.items())


def rewritten_passages(index: str | Path) -> Iterator[tuple[str, str]]:
    """``(docid, rewritten text)`` of every passage of the impact index folder ``index``."""
    read_meta(index)
    files = sorted((Path(index) / COLLECTION).glob("*.jsonl"))
    if not files:
        raise InputError(Path(index) / COLLECTION, "holds no JsonVectorCollection files")
    check_vector_collection(files)
    for path in files:
        with open(path, encoding="utf-8") as f:
            for line in f:
                doc = json.loads(line)
                yield doc["id"], repeated_terms(doc["vector"])


def main(argv: list[str] | None = None) -> int:
    parser = ArgumentParser(prog="python -m ance_ir.index.rewrite", description=__doc__)
    parser.add_argument("--index", required=True, help="impact index folder (python -m ance_ir.encode with a "
                                                       "deepct or splade model)")
    parser.add_argument("--output", required=True, help="JSONL corpus to write (id, contents)")
    parser.add_argument("--quiet", action="store_true", help="no progress bar (shown past a few seconds)")
    args = parser.parse_args(argv)
    check_output(args.output)
    check_apart(args.output, [args.index], [args.index])
    passages = empty = 0
    with atomic_write(args.output) as f:
        for docid, text in slow_bar(rewritten_passages(args.index), desc="rewrite", unit="passage",
                                    show=not args.quiet):
            f.write(json.dumps({"id": docid, "contents": text}, ensure_ascii=False) + "\n")
            passages += 1
            empty += not text
    print(f"wrote {args.output}: {passages} passages rewritten from {args.index}"
          + (f" ({empty} with no term left)" if empty else ""), file=sys.stderr)
    return 0


if __name__ == "__main__":
    run_cli(main)
