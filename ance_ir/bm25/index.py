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
from ance_ir.data.resume import slow_bar


def build_lucene_index(corpus: str | Path, output: str | Path, threads: int = 2, progress: bool = False) -> Path:
    """Index ``corpus`` (JSONL or TSV) into ``output`` with ``pyserini.index.lucene``.

    The corpus is validated and normalised first (``contents`` = title + text, one JsonCollection file),
    so bad input fails with a file:line error before Java starts. The index is written to a temporary
    folder and moved into place only when indexing succeeded and Lucene kept every passage with text (else
    InputError: :func:`check_all_indexed`). Raw documents are stored. The build holds
    a lock on ``output``; its corpus copy and index are temporaries beside it, and those a killed build
    left are removed by the next one. ``progress`` shows a bar on stderr for each step that takes more than
    ``BAR_DELAY_S``.
    """
    output = Path(output)
    with output_lock(output), _staging(output) as staging:
        passages = 0
        with open(staging / "docs.jsonl", "w", encoding="utf-8") as f:
            for p in iter_corpus(corpus, progress):
                f.write(json.dumps({"id": p.docid, "contents": p.text}, ensure_ascii=False) + "\n")
                passages += 1
        with atomic_directory(output) as tmp:
            run_lucene_indexer(["--collection", "JsonCollection", "--storeRaw"], staging, tmp, threads, corpus,
                               passages, progress)
    return output


def run_lucene_indexer(options: list[str], collection: Path, index: Path, threads: int, source: str | Path,
                       passages: int, progress: bool = False) -> None:
    """Index the collection folder ``collection`` into ``index`` with Pyserini's ``pyserini.index.lucene`` and
    ``options``, in a process of its own (killed with this one); RuntimeError with the log's tail when it fails,
    InputError naming ``source`` when Lucene kept fewer than its ``passages`` (:func:`check_all_indexed`).
    ``progress`` shows a bar on stderr after ``BAR_DELAY_S``, moved by the counts the indexer logs (about once a
    minute)."""
    cmd = [sys.executable, "-m", "ance_ir.pyserini", "pyserini.index.lucene", *options, "--input", str(collection),
           "--index", str(index), "--generator", "DefaultLuceneDocumentGenerator", "--threads", str(threads)]
    log: list[str] = []
    with slow_bar(total=passages, desc="Lucene index", unit="passage", show=progress) as bar:
        indexer = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                                   preexec_fn=_die_with_parent)
        try:
            for line in indexer.stdout:
                log.append(line)
                if counted := _INDEXED.search(line):
                    bar.update(_count(counted[1]) - bar.n)
            if indexer.wait() == 0:
                bar.update(passages - bar.n)  # Anserini's counts leave out the passages without text
        except BaseException:  # an interrupt: the indexer goes with it
            indexer.kill()
            indexer.wait()
            raise
        finally:
            indexer.stdout.close()
    text = "".join(log)
    if indexer.returncode != 0 or not any(index.glob("segments*")):
        tail = "\n".join(text.strip().splitlines()[-5:])
        raise RuntimeError(f"Pyserini indexing of {source} failed:\n{tail}")
    check_all_indexed(source, passages, text)


#: a number as Anserini logs it: with the JVM locale's thousands separators
_NUMBER = r"(\d[\d,.'\u00a0\u202f]*)"
_INDEXED = re.compile(rf"\b{_NUMBER} documents indexed")


def _count(number: str) -> int:
    return int(re.sub(r"\D", "", number))


def check_all_indexed(corpus: str | Path, passages: int, log: str) -> None:
    """InputError unless Anserini's closing counts in ``log`` (``indexed:`` and ``empty:``, a passage of no text
    that Lucene leaves out) add up to the corpus's ``passages``: a document Lucene refuses (an immense id, say) takes
    the rest of its file down with it, silently. A note when the log has no such counts (another Anserini), which
    leaves the index unchecked."""
    counts = {name: _count(n) for name, n in re.findall(rf"\b(indexed|empty):\s+{_NUMBER}\s*$", log, re.M)}
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
