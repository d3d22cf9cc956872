"""A dataset folder in BEIR's layout as one name for ``--corpus``, ``--topics`` and ``--qrels``.

    DIR/corpus.jsonl       {"_id", "title", "text"} (or any corpus layout ance_ir reads; .gz allowed)
    DIR/queries.jsonl      {"_id", "text"} (or Tevatron JSONL, or qid<TAB>query; .gz allowed)
    DIR/qrels/SPLIT.tsv    query-id<TAB>corpus-id<TAB>score, with that header (or TREC qrels)

``DIR`` means the ``test`` split and ``DIR:SPLIT`` (``DIR:train``, ``DIR:dev``) another; the corpus is
the same for every split. The topics of a split are the queries judged in its qrels, in the order of
``queries.jsonl``.
"""

from __future__ import annotations

from pathlib import Path
from typing import NamedTuple

from ance_ir.data import InputError, Qrels, Topics, read_qrels, read_topics

DEFAULT_SPLIT = "test"
LAYOUT = "a dataset folder in BEIR layout holds corpus.jsonl, queries.jsonl and qrels/SPLIT.tsv"


class DatasetFolder(NamedTuple):
    folder: Path
    split: str

    def _file(self, name: str) -> Path:
        for candidate in (self.folder / name, self.folder / f"{name}.gz"):
            if candidate.is_file():
                return candidate
        raise InputError(self.folder / name, f"no such file ({LAYOUT})")

    @property
    def corpus(self) -> Path:
        return self._file("corpus.jsonl")

    @property
    def queries(self) -> Path:
        return self._file("queries.jsonl")

    @property
    def qrels_file(self) -> Path:
        path = self.folder / "qrels" / f"{self.split}.tsv"
        if not path.is_file():
            splits = sorted(p.stem for p in (self.folder / "qrels").glob("*.tsv"))
            known = f"splits here: {', '.join(splits)}" if splits else LAYOUT
            raise InputError(path, f"no such file ({known})")
        return path

    def qrels(self) -> Qrels:
        return read_qrels(self.qrels_file)

    def topics(self) -> Topics:
        """The queries judged in this split's qrels, in the order of the queries file."""
        qrels, queries_path = self.qrels(), self.queries
        queries = read_topics(queries_path)
        missing = [qid for qid in qrels if qid not in queries]
        if missing:
            raise InputError(self.qrels_file, f"{len(missing)} judged queries are not in {queries_path} "
                                              f"(first: {missing[0]!r})")
        return {qid: text for qid, text in queries.items() if qid in qrels}


def dataset_folder(spec: str) -> DatasetFolder | None:
    """The folder and split that ``spec`` names (``DIR`` or ``DIR:SPLIT``), or None when it names no folder."""
    path = Path(spec)
    if path.is_dir():
        return DatasetFolder(path, DEFAULT_SPLIT)
    head, sep, split = spec.rpartition(":")
    if sep and head and split and "/" not in split and Path(head).is_dir():
        return DatasetFolder(Path(head), split)
    return None
