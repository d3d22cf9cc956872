"""Dense retrieval: encode queries with a :class:`DenseEncoder`, search a faiss index in Pyserini's layout.

An ME-BERT index (kind ``mebert``, ``m`` vectors per passage) is searched the same way: its query is one vector
and :meth:`~ance_ir.index.DenseIndex.search` keeps each passage's best vector.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

from tqdm import tqdm

from ance_ir.data import InputError, Run, Topics
from ance_ir.index import DenseIndex
from ance_ir.index.records import recorded_encoder_settings, recorded_model
from ance_ir.modeling import DenseEncoder
from ance_ir.modeling.kinds import load_model


def resolve_index(spec: str) -> Path:
    """A dense index folder, or a Pyserini prebuilt dense index name (downloaded by Pyserini when online)."""
    if Path(spec).is_dir():
        return Path(spec)
    from pyserini.prebuilt_index_info import FAISS_INDEX_INFO

    if spec not in FAISS_INDEX_INFO:
        raise InputError(spec, "no such dense index folder, nor a Pyserini prebuilt dense index name")
    from pyserini.util import download_prebuilt_index

    try:
        return Path(download_prebuilt_index(spec))
    except Exception as e:  # noqa: BLE001 - urllib/HTTP errors vary; all mean the same to the user
        raise RuntimeError(f"could not download Pyserini prebuilt index {spec!r} (offline?): "
                           f"{str(e).splitlines()[0][:200]}") from None


def _flag(key: str, value: Any) -> str:
    if isinstance(value, bool):
        return f"--{key}" if value else f"--no-{key}"
    return f"--{key} {value}"


def _recorded(value: Any) -> str:
    return str(value).lower() if isinstance(value, bool) else str(value)


#: the recorded settings that turn a query into a vector without changing the model's weights: they follow the
#: index even when another encoder is named
QUERY_SETTINGS = ("pooling", "normalize", "query_max_length", "query_prefix")


def encoder_for_index(dense: DenseIndex, encoder: str | None, **overrides: Any) -> DenseEncoder:
    """The encoder named on the command line, else the one recorded in the index's ``meta.json``, with the
    index's recorded settings (a named encoder: its :data:`QUERY_SETTINGS`, so that its queries land in the
    index's vector space).

    ``overrides`` (EncoderConfig fields, e.g. ``pooling``, ``normalize`` from ``--pooling``/``--normalize``)
    configure the query encoder; they are how an index without ``meta.json`` (a Pyserini-built one) is
    searched with the right settings. Where they disagree with the index's ``meta.json``, they win and one
    ``warning:`` line on stderr names both values.
    """
    recorded = recorded_encoder_settings(dense.meta)
    differ = {k: v for k, v in overrides.items() if k in recorded and recorded[k] != v}
    if differ:
        print(f"warning: {dense.folder / 'meta.json'}: the index was encoded with "
              + ", ".join(f"{k} {_recorded(recorded[k])}" for k in differ)
              + "; searching with " + ", ".join(_flag(k, v) for k, v in differ.items()) + " (the flags win)",
              file=sys.stderr)
    if encoder is None:
        encoder = dense.meta.get("encoder")
        overrides = {**dense.meta.get("encoder_config", {}), **overrides}
        if encoder is None:
            raise ValueError(f"{dense.folder}: no meta.json names the encoder; pass --encoder")
        return recorded_model(dense.folder, lambda: load_model(encoder, dense.meta.get("kind"), **overrides))
    overrides = {**{k: v for k, v in recorded.items() if k in QUERY_SETTINGS}, **overrides}
    return load_model(encoder, dense.meta.get("kind"), **overrides)


class DenseSearcher:
    """Batch dense search: queries encoded in batches, one faiss search per batch."""

    def __init__(self, index: DenseIndex, encoder: DenseEncoder):
        if getattr(encoder, "index", "dense") not in ("dense", "mebert"):
            raise ValueError(f"a {encoder.kind!r} model cannot search the dense index {index.folder} (it "
                             + (f"encodes into a {encoder.index!r} index)" if encoder.index else
                                "scores pairs: python -m ance_ir.rerank)"))
        if encoder.dim != index.dim:
            raise ValueError(f"encoder produces {encoder.dim}-dimensional vectors, "
                             f"index {index.folder} holds {index.dim}")
        self.index, self.encoder = index, encoder
        index.use_device(encoder.device)  # faiss on the encoder's GPU (or the CPU), not on GPU 0 whatever it is

    def search(self, topics: Topics, hits: int = 1000, batch_size: int = 64, progress: bool = False) -> Run:
        """Top ``hits`` passages for every query, best first, a batch of queries encoded and searched at a time;
        ``progress`` shows a bar on stderr (a log file's too) when there is more than one batch."""
        qids = list(topics)
        run: Run = {}
        for start in tqdm(range(0, len(qids), batch_size), desc="search", unit="batch",
                          disable=not progress or len(qids) <= batch_size, file=sys.stderr):
            part = qids[start:start + batch_size]
            vectors = self.encoder.encode_queries([topics[q] for q in part], batch_size=batch_size)
            scores, docids = self.index.search(vectors, hits)
            for qid, row_scores, row_docids in zip(part, scores, docids, strict=True):
                run[qid] = [(d, float(s)) for d, s in zip(row_docids, row_scores, strict=False)]
        return run
