"""tokenize_in_threads: chunks tokenized on a thread pool give the ids of one tokenizer call, in input order."""

from __future__ import annotations

import random

import pytest
from transformers import AutoTokenizer

from ance_ir.modeling.tokenize import MIN_CHUNK, tokenize_in_threads


@pytest.fixture(scope="module")
def tokenizer(tiny_bert_dir):
    return AutoTokenizer.from_pretrained(tiny_bert_dir)


def _texts(tokenizer, count: int, seed: int) -> list[str]:
    words = [w for w in tokenizer.get_vocab() if w.isalpha()]
    rng = random.Random(seed)
    return [" ".join(rng.choices(words, k=rng.randint(1, 40))) for _ in range(count)]


@pytest.mark.parametrize("count", [0, 5, MIN_CHUNK * 3 + 7])
@pytest.mark.parametrize("threads", [1, 3])
def test_thread_chunks_give_the_ids_of_one_call(tokenizer, count, threads):
    queries, passages = _texts(tokenizer, count, 1), _texts(tokenizer, count, 2)
    for pairs, options in ((None, {"truncation": True, "max_length": 24}),
                           (passages, {"truncation": "longest_first", "max_length": 30})):
        tokenizer(["reset"], truncation=True, max_length=5)  # another truncation set before: the call must set its own
        threaded = tokenize_in_threads(tokenizer, queries, pairs, threads=threads, **options)
        direct = tokenizer(queries, pairs, **options) if count else {k: [] for k in tokenizer.model_input_names}
        assert threaded.keys() == direct.keys()
        assert all(threaded[key] == direct[key] for key in direct)
        assert len(threaded["input_ids"]) == count


def test_padding_is_refused(tokenizer):
    with pytest.raises(ValueError, match="unpadded"):
        tokenize_in_threads(tokenizer, ["a"], padding="longest")
