"""A candidate source from outside the package: passages ranked by how many query words they share."""

from ance_ir.data import load_corpus
from ance_ir.negatives.sources import CandidateSource, register_source


@register_source
class WordOverlapSource(CandidateSource):
    name = "test-overlap"

    def __init__(self, corpus: str = "", min_shared: int = 0):
        self.passages = {p.docid: set(p.text.split()) for p in load_corpus(corpus)}
        self.min_shared = min_shared

    def retrieve(self, queries, depth):
        out = {}
        for qid, text in queries.items():
            words = set(text.split())
            scored = [(d, float(len(words & w))) for d, w in self.passages.items() if len(words & w) >= self.min_shared]
            out[qid] = sorted(scored, key=lambda x: (-x[1], x[0]))[:depth]
        return out
