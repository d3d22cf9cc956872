"""Topics and qrels of the standard collections (DL19, DL20, MS MARCO dev, BEIR), without corpora.

First through Pyserini's ``get_topics``/``get_qrels`` (which download when online). Offline, the same
files are read from the ``topics-and-qrels/`` folder of the Anserini fatjar inside the
``pyserini==0.21.0`` wheel, fetched with pip and cached under ``$ANCE_IR_HOME``.
"""

from __future__ import annotations

import sys
import zipfile
from pathlib import Path

from ance_ir.data import Qrels, Topics, read_qrels, read_topics_tsv
from ance_ir.data.atomic import atomic_write
from ance_ir.datasets.home import ance_ir_home, pip_download

WHEEL = "pyserini-0.21.0-py3-none-any.whl"
WHEEL_SHA256 = "695c7e3f28d1a5b8689bf2cbe8f9ffab63c28a179fe9f8ceeeaa8494100eb93f"
WHEEL_SIZE = 154_000_000  # bytes, about: announced before the download and used for its progress
FATJAR = "pyserini/resources/jars/anserini-0.21.0-fatjar.jar"

ALIASES = {"dl19": "dl19-passage", "dl20": "dl20-passage", "msmarco-dev": "msmarco-passage-dev-subset"}

# Pyserini name -> (topics file, qrels file) inside topics-and-qrels/.
FILES = {
    "dl19-passage": ("topics.dl19-passage.txt", "qrels.dl19-passage.txt"),
    "dl20-passage": ("topics.dl20.txt", "qrels.dl20-passage.txt"),
    "msmarco-passage-dev-subset": ("topics.msmarco-passage.dev-subset.txt", "qrels.msmarco-passage.dev-subset.txt"),
}
BEIR = [
    "arguana", "climate-fever", "dbpedia-entity", "fever", "fiqa", "hotpotqa", "nfcorpus", "nq", "quora",
    "scidocs", "scifact", "trec-covid", "webis-touche2020",
]
for _name in BEIR:
    FILES[f"beir-v1.0.0-{_name}-test"] = (f"topics.beir-v1.0.0-{_name}.test.tsv.gz",
                                           f"qrels.beir-v1.0.0-{_name}.test.txt")


def canonical(name: str) -> str | None:
    """The Pyserini name for ``name`` (aliases resolved), or None if it is not a known set."""
    name = ALIASES.get(name, name)
    return name if name in FILES else None


def _from_fatjar(filename: str) -> Path:
    """Extract one ``topics-and-qrels`` file from the pyserini 0.21.0 wheel (cached)."""
    target = ance_ir_home() / "topics-and-qrels" / filename
    if target.is_file():
        return target
    why = (f"{filename} is read from the Anserini jar inside it; the wheel is kept for the other "
           "topics and qrels names")
    wheel = pip_download("pyserini==0.21.0", WHEEL, WHEEL_SHA256, size=WHEEL_SIZE, why=why)
    with zipfile.ZipFile(wheel) as whl, zipfile.ZipFile(whl.open(FATJAR)) as jar:
        data = jar.read(f"topics-and-qrels/{filename}")
    with atomic_write(target, "wb") as f:
        f.write(data)
    return target


def _via_pyserini(kind: str, name: str):
    from pyserini.search import get_qrels, get_topics

    try:
        if kind == "topics":
            return {str(qid): fields["title"].strip() for qid, fields in get_topics(name).items()}
        return {str(qid): {str(d): int(g) for d, g in judged.items()} for qid, judged in get_qrels(name).items()}
    except Exception as e:  # noqa: BLE001 - Pyserini raises JavaException/ValueError/OSError when offline
        print(f"pyserini could not load {kind} {name!r} ({str(e).splitlines()[0][:120]}); "
              f"using the files in the pyserini 0.21.0 wheel instead", file=sys.stderr)
        return None


def load_topics(name: str) -> Topics:
    name = canonical(name) or name
    return _via_pyserini("topics", name) or read_topics_tsv(_from_fatjar(FILES[name][0]))


def load_qrels(name: str) -> Qrels:
    name = canonical(name) or name
    return _via_pyserini("qrels", name) or read_qrels(_from_fatjar(FILES[name][1]))
