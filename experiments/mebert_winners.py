"""Which of a passage's m ME-BERT vectors gives its score: for each (query, passage) pair of a run's top ``--depth``,
the position (0 = CLS) of the passage vector with the largest dot product with the query vector.

    python -m experiments.mebert_winners --model train-runs/interaction/minilm/mebert-m4.seed1 \\
        --run runs/rag24/interaction/minilm/mebert-m4.seed1.test.trec.gz --topics rag24-mini-test --depth 10
    python -m experiments.mebert_winners --model minilm --m 4 \\
        --run runs/rag24/interaction/minilm/mebert-m4.seed1.test.trec.gz --topics rag24-mini-test --depth 10

A model name that is not an ME-BERT checkpoint (``minilm``) is loaded as one, untrained (``--m`` vectors, CLS
queries, unnormalised, as ``configs/rag24-mini/mebert.yaml`` starts). Prints one line: the count of pairs each
position wins, and the mean margin of the winner over the best other position.
"""

from __future__ import annotations

import argparse

import torch

from ance_ir.data import read_run
from ance_ir.datasets import resolve_corpus, resolve_topics
from ance_ir.modeling.mebert import MeBertEncoder
from ance_ir.rerank import passages_for


def winners(model: MeBertEncoder, queries: list[str], passages: list[list[str]]) -> tuple[list[int], float]:
    """Wins per position over every (query i, passages[i][j]) pair, and the winner's mean margin."""
    counts, margins = torch.zeros(model.m, dtype=torch.long), []
    with torch.no_grad():
        vectors = torch.as_tensor(model.encode_queries(queries))
        for query, texts in zip(vectors, passages, strict=True):
            scores = torch.einsum("d,pmd->pm", query, torch.as_tensor(model.encode_passages(texts)))
            counts += torch.bincount(scores.argmax(-1), minlength=model.m)
            if model.m > 1:
                top = scores.topk(2, dim=-1).values
                margins.append(top[:, 0] - top[:, 1])
    return counts.tolist(), torch.cat(margins).mean().item() if margins else 0.0


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--model", required=True, help="ME-BERT run folder or checkpoint, or a backbone name")
    parser.add_argument("--m", type=int, help="vectors a passage (default: the checkpoint's)")
    parser.add_argument("--run", required=True, help="TREC run whose top --depth pairs are examined")
    parser.add_argument("--topics", required=True)
    parser.add_argument("--corpus", default="rag24-mini")
    parser.add_argument("--depth", type=int, default=10)
    args = parser.parse_args()
    model = MeBertEncoder.from_pretrained(args.model, m=args.m, normalize=False)
    topics, run = resolve_topics(args.topics), read_run(args.run)
    texts = passages_for(run, args.depth, resolve_corpus(args.corpus), args.run)
    qids = [q for q in topics if q in run]
    top = [[texts[docid] for docid, _ in run[q][:args.depth]] for q in qids]
    counts, margin = winners(model, [topics[q] for q in qids], top)
    print(f"{args.model} (m = {model.m}): wins by position {counts} over {sum(counts)} pairs; "
          f"winner's mean margin {margin:.3f}")


if __name__ == "__main__":
    main()
