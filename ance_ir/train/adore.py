"""ADORE (Zhan et al., 2021): ``task: adore``, the query tower trained against a fixed passage index.

The passages are encoded once (``python -m ance_ir.encode`` with the starting model, usually one trained by STAR)
into the dense index ``task.index``; only the query tower trains (a shared model is untied first, so that the saved
model's passage tower still matches the index). At every step each query's current vector retrieves its top
``task.depth`` passages from that index, so the negatives are the model's own, never stale. Each (positive,
retrieved negative) pair costs RankNet's ``log(1 + exp((s- - s+) / loss.temperature))`` weighted by LambdaLoss's
``|delta nDCG|``, the change of nDCG@``task.cutoff`` (0: the whole list) when the two swap places in the current
ranking; a positive that was not retrieved ranks just after the retrieved list. Gains are binary; the ideal DCG
counts the query's judged positives.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import torch
import torch.nn.functional as F

from ance_ir.modeling import DenseEncoder
from ance_ir.train.dataset import PairStream
from ance_ir.train.settings import ConfigError
from ance_ir.train.task import StepLoss, TaskContext, TrainingTask, register_task


class QueryTower(torch.nn.Module):
    """``forward(queries)`` -> query vectors ``[B, D]``; the passage tower is frozen."""

    def __init__(self, encoder: DenseEncoder):
        super().__init__()
        self.encoder = encoder
        encoder.passage_tower.requires_grad_(False)

    def forward(self, queries: Mapping[str, torch.Tensor]) -> torch.Tensor:
        return self.encoder.embed_queries(queries)


def discount(rank: torch.Tensor, cutoff: int) -> torch.Tensor:
    """``1 / log2(1 + rank)`` (ranks from 1), 0 beyond ``cutoff`` (0: no cutoff)."""
    value = 1.0 / torch.log2(1.0 + rank.float())
    return value if cutoff <= 0 else value * (rank <= cutoff)


def lambda_weights(positive: torch.Tensor, negatives: torch.Tensor, retrieved: torch.Tensor, relevant: int,
                   cutoff: int) -> torch.Tensor:
    """``|delta nDCG|`` of swapping one query's positive with each of its negatives (binary gains).

    ``positive`` is the positive's score (a scalar), ``negatives`` ``[N]`` and ``retrieved`` ``[K]`` (every retrieved
    passage, positives included, best first) are scores by the same query vector; ranks follow from them (a positive
    below every retrieved passage ranks ``K + 1``). ``relevant`` is the number of judged positives of the query.
    """
    pos_rank = 1 + (retrieved > positive).sum()
    neg_rank = 1 + (retrieved > negatives[:, None]).sum(1)
    ideal = discount(torch.arange(1, relevant + 1, device=retrieved.device), cutoff).sum()
    return (discount(pos_rank, cutoff) - discount(neg_rank, cutoff)).abs() / ideal.clamp(min=1e-12)


@register_task
class AdoreTask(TrainingTask):
    """Query tower only; each step's negatives are the current query vectors' top passages of a fixed index."""

    name = "adore"
    options = {"index": None, "depth": 200, "cutoff": 10}
    own_loss = "pairwise, LambdaRank-weighted over its retrieved negatives; loss.temperature applies"
    reads = frozenset({"loss"})  # its temperature
    why_unread = {"negatives": "ADORE's negatives are each query's retrieved passages, all of them (task.depth)"}
    evaluate_with = "python -m ance_ir.search --index INDEX (its index is fixed while it trains)"

    def __init__(self, ctx: TaskContext, model: torch.nn.Module):
        super().__init__(ctx, model)
        from ance_ir.index import load_dense_index
        from ance_ir.train.teacher import fixed_passage_vectors

        options = ctx.config.task.options
        self.index = load_dense_index(options["index"])
        self.index.use_device(ctx.device)  # each rank's faiss copy on its own GPU
        self.row, vectors = fixed_passage_vectors(self.index, "task.index", {pos for _, pos in ctx.data.pairs},
                                                  "judged passages of the training pairs")
        if self.index.dim != model.dim:
            raise ConfigError("task.index", f"{options['index']} holds {self.index.dim}-dimensional vectors, the "
                                            f"model's are {model.dim}-dimensional")
        self.vectors = torch.from_numpy(vectors).to(ctx.device)
        self.relevant: dict[str, int] = {}
        for qid, _ in ctx.data.pairs:
            self.relevant[qid] = self.relevant.get(qid, 0) + 1
        model.untie()
        self._module = QueryTower(model)
        self.stream = PairStream(len(ctx.data.pairs), ctx.config.seed)

    def start_events(self) -> list[dict[str, Any]]:
        return [{"step": 0, "event": "adore-index", "index": str(self.ctx.config.task.options["index"]),
                 "encoder": self.index.meta.get("encoder"), "passages": len(self.index)}]

    @classmethod
    def check_config(cls, config: Any) -> None:
        options = config.task.options
        if not options["index"]:
            raise ConfigError("task.index", "ADORE needs the dense index of its starting model: python -m "
                                            "ance_ir.encode --corpus CORPUS --encoder MODEL --output DIR")
        for key in ("depth", "cutoff"):
            value = options[key]
            if not isinstance(value, int) or isinstance(value, bool) or value < (1 if key == "depth" else 0):
                raise ConfigError(f"task.{key}", f"must be a {'positive' if key == 'depth' else 'non-negative'} "
                                                 f"integer, got {value!r}")
        if config.model.kind not in (None, "dense"):
            raise ConfigError("model.kind", f"ADORE trains dense dual encoders, got {config.model.kind!r}")

    @property
    def module(self) -> torch.nn.Module:
        return self._module

    @property
    def examples(self) -> int:
        return len(self.ctx.data.pairs)

    @property
    def epochs_done(self) -> float:
        return self.stream.epochs_done

    def next_batch(self) -> list[tuple[str, str]]:
        pairs = [self.ctx.data.pairs[i] for i in self.stream.take(self.ctx.config.task.batch_size)]
        return self.ctx.dist.local_share(pairs)

    def loss(self, module: torch.nn.Module, batch: Sequence[tuple[str, str]],
             autocast: Callable[[], contextlib.AbstractContextManager]) -> StepLoss:
        data, options = self.ctx.data, self.ctx.config.task.options
        inputs = self.model.tokenize_queries([data.queries[qid] for qid, _ in batch]).to(self.ctx.device)
        with autocast():
            queries = module(dict(inputs)).float()
        _, hits = self.index.search(queries.detach().cpu().numpy(), options["depth"])
        losses = []
        for query, (qid, positive), docids in zip(queries, batch, hits, strict=True):
            docids = list(docids)
            retrieved = self.vectors[torch.tensor([self.row[d] for d in docids], device=self.ctx.device)] @ query
            # the negatives' and a retrieved positive's scores are taken from ``retrieved`` itself: a second product
            # can round a passage's score below its own entry there, and rank it one place lower
            negatives = retrieved[torch.tensor([d not in data.exclude[qid] for d in docids], device=self.ctx.device)]
            positive_score = (retrieved[docids.index(positive)] if positive in docids
                              else self.vectors[self.row[positive]] @ query)
            weights = lambda_weights(positive_score.detach(), negatives.detach(), retrieved.detach(),
                                     self.relevant[qid], options["cutoff"])
            margins = (negatives - positive_score) / self.ctx.config.loss.temperature
            losses.append((weights * F.softplus(margins)).sum())
        return StepLoss(torch.stack(losses).mean())

    def state_dict(self) -> dict[str, Any]:
        return {"data": self.stream.state_dict()}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        self.stream.load_state_dict(state["data"])

