"""Documents for the ANCE paper's document task: documents derived from segmented passages, documents split into
passages (FirstP, MaxP), and passage runs pooled into document runs.

* :mod:`~ance_ir.documents.segments`: a document corpus and document qrels from a corpus of segments whose ids
  carry their document (``msmarco_v2.1_doc_<doc>#<n>_<offset>``: everything before the first ``#``).
* :mod:`~ance_ir.documents.passages`: a document cut into windows of model tokens (``DOCID#K``), FirstP keeping
  the first window only.
* :mod:`~ance_ir.documents.pooling`: a passage run pooled per document (max or first passage), Pyserini's
  ``--max-passage``.

``python -m ance_ir.documents derive|split|pool`` runs each.
"""

from ance_ir.documents.pooling import POOLINGS, pool_run
from ance_ir.documents.segments import document_id, document_qrels, documents_from_segments

__all__ = ["POOLINGS", "document_id", "document_qrels", "documents_from_segments", "pool_run"]
