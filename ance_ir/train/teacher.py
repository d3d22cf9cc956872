"""A dense teacher (``loss.teacher_index``): the distillation losses' scores from a dense index of the corpus.

The index (``python -m ance_ir.encode`` with the teacher model) holds the teacher's passage vectors; the encoder
its ``meta.json`` records encodes every training query once, in fp32, when training starts. The teacher's score of
a (query, passage) pair is then a dot product of stored vectors, so it scores any passage a step draws, the
batch's other passages too (in-batch distillation), at no model cost per step, and the same scores after a resume.
The groups' scores (``data.source: groups``, written by ``python -m ance_ir.rerank --groups``) score only each
query's own group. :func:`fixed_passage_vectors` reads such an index for lookups by docid (ADORE's fixed index
too).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import TYPE_CHECKING

import numpy as np
import torch

from ance_ir.train.settings import ConfigError

if TYPE_CHECKING:
    from ance_ir.index import DenseIndex


def fixed_passage_vectors(index: DenseIndex, setting: str, needed: Iterable[str],
                          needed_what: str) -> tuple[dict[str, int], np.ndarray]:
    """A dense index read for lookups by docid during training (a dense teacher's, ADORE's fixed one): each docid's
    row and the vectors (float32, in memory). ConfigError naming ``setting`` when it holds more than one vector a
    passage or lacks one of ``needed`` (``needed_what`` says what they are)."""
    from ance_ir.index.dense_index import stored_vectors

    if index.vectors_per_passage != 1:
        raise ConfigError(setting, f"{index.folder} holds {index.vectors_per_passage} vectors a passage; one is "
                                   "needed (a dense model's index)")
    row = {docid: i for i, docid in enumerate(index.docids)}
    missing = sorted(set(needed) - row.keys())
    if missing:
        raise ConfigError(setting, f"{index.folder} lacks {len(missing)} {needed_what} (e.g. {missing[0]!r}); "
                                   "encode the training corpus")
    return row, np.array(stored_vectors(index), dtype=np.float32)


class DenseTeacher:
    """Scores of training queries against corpus passages by a dense model's stored vectors."""

    def __init__(self, index_path: str, queries: Mapping[str, str], docids: Iterable[str], device: torch.device):
        from ance_ir.index import load_dense_index
        from ance_ir.search.dense import encoder_for_index

        index = load_dense_index(index_path)
        self.row, passages = fixed_passage_vectors(index, "loss.teacher_index", docids,
                                                   "passages of the training corpus")
        encoder = encoder_for_index(index, None)
        qids = sorted(queries)
        with torch.inference_mode():
            vectors = encoder.encode_queries([queries[q] for q in qids], batch_size=64)
        self.query_row = {qid: i for i, qid in enumerate(qids)}
        self.queries = torch.from_numpy(np.asarray(vectors, dtype=np.float32)).to(device)
        self.passages = torch.from_numpy(passages).to(device)
        self.encoder = index.meta.get("encoder")

    def scores(self, qids: Sequence[str], docids: Sequence[str]) -> torch.Tensor:
        """``[len(qids), len(docids)]``: every query's score of every passage."""
        device = self.queries.device
        queries = self.queries[torch.tensor([self.query_row[q] for q in qids], device=device)]
        passages = self.passages[torch.tensor([self.row[d] for d in docids], device=device)]
        return queries @ passages.T
