"""Documents cut into passages of model tokens, as the ANCE paper's document task does.

Each document becomes windows of ``length`` tokens (the model's tokenizer, special tokens not counted) starting every
``stride`` tokens, at most ``max_passages`` of them, ids ``DOCID#0``, ``DOCID#1``, ... (the title, if any, is kept
on every window). The paper's settings: FirstP, one window of 512 tokens; MaxP, the first four windows of 512 tokens.
A window is cut from the original text at its tokens' character offsets, so its text is the document's own text.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from pathlib import Path

from transformers import PreTrainedTokenizerBase

from ance_ir.data import InputError
from ance_ir.data.corpus import Passage
from ance_ir.documents.segments import DEFAULT_DELIMITER


def split_document(document: Passage, tokenizer: PreTrainedTokenizerBase, length: int, stride: int,
                   max_passages: int | None = None, delimiter: str = DEFAULT_DELIMITER) -> list[Passage]:
    """The windows of one document (one empty-text window for an empty document)."""
    if length < 1 or stride < 1:
        raise ValueError(f"length and stride must be positive, got {length} and {stride}")
    offsets = tokenizer(document.contents, add_special_tokens=False, return_offsets_mapping=True,
                        verbose=False)["offset_mapping"]
    starts = range(0, max(len(offsets) - length, 0) + 1, stride)
    if len(offsets) > length and (len(offsets) - length) % stride:
        starts = [*starts, len(offsets) - length]  # the last window ends at the document's end
    windows = []
    for k, start in enumerate(starts):
        if max_passages is not None and k == max_passages:
            break
        span = offsets[start:start + length]
        text = document.contents[span[0][0]:span[-1][1]] if span else ""
        windows.append(Passage(f"{document.docid}{delimiter}{k}", text, document.title))
    return windows


def split_documents(documents: Iterable[Passage], source: str | Path, tokenizer: PreTrainedTokenizerBase,
                    length: int, stride: int, max_passages: int | None = None,
                    delimiter: str = DEFAULT_DELIMITER) -> Iterator[Passage]:
    """Every document's windows, in corpus order (see :func:`split_document`); InputError naming ``source`` (the
    corpus) for a document id that holds the delimiter."""
    for document in documents:
        if delimiter in document.docid:
            raise InputError(source, f"document id {document.docid!r} contains the delimiter {delimiter!r}, which "
                                     "separates a window's number (see --delimiter)")
        yield from split_document(document, tokenizer, length, stride, max_passages, delimiter)
