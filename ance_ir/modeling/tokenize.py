"""Tokenizing many texts on all the host's threads.

A fast (Rust) tokenizer releases the GIL while it encodes, so chunks of a long list tokenized by a thread pool run
in parallel. On a GPU the host's tokenizing is what the device waits for (docs/bench.md, sections 5 and 7).
"""

from __future__ import annotations

from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from itertools import pairwise
from typing import Any

import torch
from transformers import BatchEncoding, PreTrainedTokenizerBase

#: fewest texts a thread gets: below this a thread costs more than it saves
MIN_CHUNK = 256


def tokenize_in_threads(tokenizer: PreTrainedTokenizerBase, texts: Sequence[str],
                        pairs: Sequence[str] | None = None, threads: int | None = None,
                        **options: Any) -> BatchEncoding:
    """``tokenizer(texts, pairs, **options)`` unpadded (lists of ids), tokenized in chunks over ``threads``
    threads (default: torch's intra-op thread count) and joined in input order: the same ids as one call.

    The first text is tokenized alone before the threads start: that call sets the backend's truncation settings,
    which must not change while other threads encode with it (the Rust tokenizer refuses: "Already borrowed").
    """
    if "padding" in options or "return_tensors" in options:
        raise ValueError("tokenize_in_threads returns unpadded lists; pad batches afterwards")
    texts = list(texts)
    if not texts:  # a tokenizer fails on an empty list
        return BatchEncoding({key: [] for key in tokenizer.model_input_names})
    pairs = None if pairs is None else list(pairs)
    threads = min(threads or torch.get_num_threads(), len(texts) // MIN_CHUNK)
    if threads <= 1:
        return tokenizer(texts, pairs, **options)
    size = -(-(len(texts) - 1) // threads)
    bounds = [*range(1, len(texts), size), len(texts)]  # the threads' spans, after the first text

    def encode(span: tuple[int, int]) -> BatchEncoding:
        return tokenizer(texts[slice(*span)], None if pairs is None else pairs[slice(*span)], **options)

    first = encode((0, 1))
    with ThreadPoolExecutor(threads) as pool:
        parts = [first, *pool.map(encode, pairwise(bounds))]
    return BatchEncoding({key: [row for part in parts for row in part[key]] for key in first})
