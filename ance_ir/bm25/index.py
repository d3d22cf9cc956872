"""Build a Lucene BM25 index with Pyserini's indexer."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from ance_ir.data import InputError, atomic_directory, iter_corpus, output_lock, remove_stale_temporaries


def build_lucene_index(corpus: str | Path, output: str | Path, threads: int = 2) -> Path:
    """Index ``corpus`` (JSONL or TSV) into ``output`` with ``pyserini.index.lucene``.

    The corpus is validated and normalised first (``contents`` = title + text, one JsonCollection file),
    so bad input fails with a file:line error before Java starts. The index is written to a temporary
    folder and moved into place only when indexing succeeded and Lucene kept every passage with text (else
    InputError: :func:`check_all_indexed`). Raw documents are stored. The build holds
    a lock on ``output``; its corpus copy and index are temporaries beside it, and those a killed build
    left are removed by the next one.
    """
    output = Path(output)
    with output_lock(output), _staging(output) as staging:
        passages = 0
        with open(staging / "docs.jsonl", "w", encoding="utf-8") as f:
            for p in iter_corpus(corpus):
                f.write(json.dumps({"id": p.docid, "contents": p.text}, ensure_ascii=False) + "\n")
                passages += 1
        with atomic_directory(output) as tmp:
            cmd = [sys.executable, "-m", "ance_ir.pyserini", "pyserini.index.lucene",
                   "--collection", "JsonCollection", "--input", str(staging), "--index", str(tmp),
                   "--generator", "DefaultLuceneDocumentGenerator", "--threads", str(threads), "--storeRaw"]
            result = subprocess.run(cmd, capture_output=True, text=True, preexec_fn=_die_with_parent)
            if result.returncode != 0 or not any(tmp.glob("segments*")):
                tail = "\n".join((result.stderr or result.stdout).strip().splitlines()[-5:])
                raise RuntimeError(f"Pyserini indexing of {corpus} failed:\n{tail}")
            check_all_indexed(corpus, passages, result.stdout + "\n" + result.stderr)
    return output


def check_all_indexed(corpus: str | Path, passages: int, log: str) -> None:
    """InputError unless Anserini's closing counts in ``log`` (``indexed:`` and ``empty:``, a passage of no text
    that Lucene leaves out; printed with the JVM locale's thousands separators) add up to the corpus's
    ``passages``: a document Lucene refuses (an immense id, say) takes the rest of its file down with it, silently.
    A note when the log has no such counts (another Anserini), which leaves the index unchecked."""
    counts = {name: int(re.sub(r"\D", "", n))
              for name, n in re.findall(r"\b(indexed|empty):\s+(\d[\d,.'\u00a0\u202f]*)\s*$", log, re.M)}
    if len(counts) != 2:
        print(f"note: Anserini's log gives no count of the passages it indexed; {corpus}'s {passages} passages "
              "are not checked against the index", file=sys.stderr)
    elif sum(counts.values()) != passages:
        errors = [line.split(" - ", 1)[-1] for line in log.splitlines() if " ERROR " in line]
        raise InputError(corpus, f"Lucene indexed {counts['indexed']} of its {passages} passages "
                                 f"({counts['empty']} without text){': ' + errors[0][:300] if errors else ''}")


@contextmanager
def _staging(output: Path) -> Iterator[Path]:
    """A temporary folder beside ``output`` for the corpus copy, after removing what a killed build left."""
    for stale in remove_stale_temporaries(output):
        print(f"removed {stale}, left by an interrupted build", file=sys.stderr)
    staging = Path(tempfile.mkdtemp(prefix=f".{output.name}.corpus.", suffix=".tmp", dir=output.parent))
    try:
        yield staging
    finally:
        shutil.rmtree(staging, ignore_errors=True)


def _die_with_parent() -> None:
    """In the indexer's process (Linux): be killed when this process dies, so a ``kill -9`` of the build
    leaves no indexer writing into temporaries that the next build removes."""
    if sys.platform.startswith("linux"):
        import ctypes
        import signal

        ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG
