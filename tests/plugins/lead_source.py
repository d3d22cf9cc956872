"""A data source from outside the package: each passage is the positive of a query made of its first words."""

from ance_ir.data import load_corpus
from ance_ir.datasets import resolve_corpus
from ance_ir.train.dataset import DataSource, TrainData, register_data_source


@register_data_source
class LeadSource(DataSource):
    name = "test-lead"
    options = {"words": 3}

    def load(self) -> TrainData:
        path = resolve_corpus(self.data.corpus)
        texts = {p.docid: p.text for p in load_corpus(path)}
        words = self.data.options["words"]
        queries = {f"lead-{docid}": " ".join(text.split()[:words]) for docid, text in texts.items()}
        return TrainData(corpus_path=path, docids=list(texts), texts=texts, queries=queries,
                         exclude={f"lead-{docid}": frozenset([docid]) for docid in texts},
                         pairs=[(f"lead-{docid}", docid) for docid in texts])
