"""BFS, the Body First Selection task (Chang et al., 2020): a random sentence of a document's first passage (its
opening segment, ``#0``) is the query, another passage of the same document the positive; one pair per such
passage. Documents come from segment ids or ``doc_field`` (:func:`~ance_ir.pretrain_data.base.group_documents`);
a document whose first passage is not in the corpus gives no pair. The document's passages are never its
negatives."""

from __future__ import annotations

import random
from pathlib import Path

from ance_ir.data.corpus import Passage
from ance_ir.pretrain_data.base import Pair, PretrainSource, check_documents, group_documents
from ance_ir.pretrain_data.sentences import split_sentences
from ance_ir.train.dataset import register_data_source


@register_data_source
class BFSSource(PretrainSource):
    name = "bfs"
    options = {"doc_field": ""}
    no_pairs = "no document has its first passage (#0) with a sentence and another passage"

    def generate(self, path: Path, passages: list[Passage], rng: random.Random) -> list[Pair]:
        documents = group_documents(path, passages, self.data.options["doc_field"])
        check_documents(path, documents, self.data.options["doc_field"])
        pairs = []
        for doc in self.counted(documents, "document"):
            sentences = split_sentences(doc.first.contents) if doc.first else []
            if not sentences:
                continue
            related = frozenset(p.docid for p in doc.passages)
            pairs.extend(Pair(rng.choice(sentences), p.docid, doc.id, related=related)
                         for p in doc.passages if p is not doc.first)
        return pairs
