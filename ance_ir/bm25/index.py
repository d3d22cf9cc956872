"""Build a Lucene BM25 index with Pyserini's indexer."""

from __future__ import annotations

import json
import subprocess
import sys
import tempfile
from pathlib import Path

from ance_ir.data import atomic_directory, iter_corpus


def build_lucene_index(corpus: str | Path, output: str | Path, threads: int = 2) -> Path:
    """Index ``corpus`` (JSONL or TSV) into ``output`` with ``pyserini.index.lucene``.

    The corpus is validated and normalised first (``contents`` = title + text, one JsonCollection file),
    so bad input fails with a file:line error before Java starts. The index is written to a temporary
    folder and moved into place only when indexing succeeded. Raw documents are stored.
    """
    output = Path(output)
    with tempfile.TemporaryDirectory(prefix="ance-ir-bm25-") as staging:
        with open(Path(staging) / "docs.jsonl", "w", encoding="utf-8") as f:
            for p in iter_corpus(corpus):
                f.write(json.dumps({"id": p.docid, "contents": p.text}, ensure_ascii=False) + "\n")
        with atomic_directory(output) as tmp:
            cmd = [sys.executable, "-m", "ance_ir.pyserini", "pyserini.index.lucene",
                   "--collection", "JsonCollection", "--input", staging, "--index", str(tmp),
                   "--generator", "DefaultLuceneDocumentGenerator", "--threads", str(threads), "--storeRaw"]
            result = subprocess.run(cmd, capture_output=True, text=True)
            if result.returncode != 0 or not any(tmp.glob("segments*")):
                tail = "\n".join((result.stderr or result.stdout).strip().splitlines()[-5:])
                raise RuntimeError(f"Pyserini indexing of {corpus} failed:\n{tail}")
    return output
