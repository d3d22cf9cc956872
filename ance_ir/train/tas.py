"""Topic-aware sampling (Hofstätter et al., 2021): ``task: tas`` and ``task: tas-b``.

The training queries are clustered once by k-means (faiss) on their vectors, from the model at step 0 or from
the model folder ``encoder``; each batch takes its queries from ``clusters_per_batch`` clusters drawn at random
(an even share from each), each query with a random positive and negatives from the configured sampler (TAS).
TAS-B also balances the teacher's margins: the (positive, negative) pairs of a query (its positives times its
training groups' negatives, both scored by the teacher: ``data.source: groups`` written by ``python -m
ance_ir.rerank --groups``) have margins ``t+ - t-`` whose range is cut into ``bins`` equal bins; a non-empty bin is
drawn uniformly, then a pair in it. The cluster of each query and one RNG are the checkpointed state.
"""

from __future__ import annotations

import random
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import numpy as np
import torch

from ance_ir.train.collator import Group
from ance_ir.train.contrastive import ContrastiveTask
from ance_ir.train.dataset import TrainData
from ance_ir.train.negatives import NegativeSampler
from ance_ir.train.settings import ConfigError
from ance_ir.train.task import TaskContext, register_task


def cluster_queries(vectors: np.ndarray, qids: Sequence[str], clusters: int, seed: int) -> list[list[str]]:
    """The queries grouped by k-means on their vectors (faiss, ``min(clusters, len(qids))`` centroids, best of 5
    runs); empty clusters are left out. A few queries a cluster is TAS's design, so faiss's warning below 39 points a
    centroid (advice for quantizers) is turned off."""
    import faiss

    x = np.ascontiguousarray(vectors, dtype=np.float32)
    k = min(clusters, len(qids))
    kmeans = faiss.Kmeans(x.shape[1], k, niter=20, nredo=5, seed=seed, verbose=False, min_points_per_centroid=1)
    kmeans.train(x)
    _, assign = kmeans.index.search(x, 1)
    members: list[list[str]] = [[] for _ in range(k)]
    for qid, c in zip(qids, assign[:, 0].tolist(), strict=True):
        members[c].append(qid)
    return [m for m in members if m]


def margin_bins(positives: Sequence[str], negatives: Sequence[str], teacher: Mapping[str, float],
                bins: int) -> list[list[tuple[str, str]]]:
    """A query's (positive, negative) pairs with teacher scores, by margin ``t+ - t-`` in ``bins`` equal bins
    over the range of its margins (a single margin: one bin); empty bins are left out."""
    pairs = [(p, n, teacher[p] - teacher[n]) for p in positives if p in teacher for n in negatives if n in teacher]
    if not pairs:
        return []
    low, high = min(m for *_, m in pairs), max(m for *_, m in pairs)
    width = (high - low) / bins
    out: list[list[tuple[str, str]]] = [[] for _ in range(bins)]
    for p, n, m in pairs:
        out[min(int((m - low) / width), bins - 1) if width > 0 else 0].append((p, n))
    return [b for b in out if b]


class TopicDraws:
    """Groups drawn by topic: ``clusters_per_batch`` random clusters, an even share of the batch's queries from
    each (without replacement while a cluster has enough), then each query's passages (see the module).

    ``bins`` is None for TAS (a random positive, negatives from ``sampler``), else TAS-B's per-query margin bins
    (one negative). The clusters come from ``make_clusters`` at the first draw; the state is them, the RNG and the
    number of groups drawn.
    """

    def __init__(self, data: TrainData, sampler: NegativeSampler, seed: int, n_negatives: int,
                 clusters_per_batch: int, bins: dict[str, list[list[tuple[str, str]]]] | None,
                 make_clusters: Callable[[], list[list[str]]]):
        self.data, self.sampler, self.n_negatives = data, sampler, n_negatives
        self.clusters_per_batch, self.bins, self.make_clusters = clusters_per_batch, bins, make_clusters
        self.positives: dict[str, list[str]] = {}
        for qid, positive in data.pairs:
            self.positives.setdefault(qid, []).append(positive)
        self.rng = random.Random(seed)
        self.clusters: list[list[str]] | None = None
        self.drawn = 0

    def draw(self, count: int) -> list[Group]:
        """The next ``count`` groups."""
        if self.clusters is None:
            self.clusters = self.make_clusters()
        rng = self.rng
        chosen = rng.sample(range(len(self.clusters)), min(self.clusters_per_batch, len(self.clusters)))
        shares = [count // len(chosen) + (i < count % len(chosen)) for i in range(len(chosen))]
        qids: list[str] = []
        for c, share in zip(chosen, shares, strict=True):
            members = self.clusters[c]
            qids += rng.sample(members, share) if share <= len(members) else rng.choices(members, k=share)
        self.drawn += count
        return [self._group(qid, rng) for qid in qids]

    def _group(self, qid: str, rng: random.Random) -> Group:
        if self.bins is not None:
            positive, negative = rng.choice(rng.choice(self.bins[qid]))
            return Group(qid, positive, (negative,))
        positive = rng.choice(self.positives[qid])
        return Group(qid, positive, tuple(self.sampler.sample(qid, self.data.exclude[qid], self.n_negatives, rng)))

    @property
    def epochs_done(self) -> float:
        return self.drawn / len(self.data.pairs)

    def state_dict(self) -> dict[str, Any]:
        return {"topic_clusters": self.clusters, "topic_rng": self.rng.getstate(), "topic_drawn": self.drawn}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        self.clusters, self.drawn = state["topic_clusters"], state["topic_drawn"]
        self.rng.setstate(state["topic_rng"])


@register_task
class TASTask(ContrastiveTask):
    """The contrastive task on topic-aware batches (TAS); any negative sampler and loss."""

    name = "tas"
    options = {"clusters": 32, "clusters_per_batch": 1, "encoder": None}

    def __init__(self, ctx: TaskContext, model: torch.nn.Module):
        super().__init__(ctx, model)
        options, config = ctx.config.task.options, ctx.config
        bins = self.margin_bins()
        qids = sorted(bins) if bins is not None else sorted({q for q, _ in ctx.data.pairs})
        self.draws = TopicDraws(ctx.data, self.sampler, config.seed, config.task.n_negatives,
                                options["clusters_per_batch"], bins,
                                lambda: ctx.dist.on_main(lambda: self._clusters(qids)))

    def margin_bins(self) -> dict[str, list[list[tuple[str, str]]]] | None:
        """TAS-B's margin bins of each query (None: no balancing)."""
        return None

    @classmethod
    def check_config(cls, config: Any) -> None:
        options = config.task.options
        for key in ("clusters", "clusters_per_batch"):
            if not isinstance(options[key], int) or options[key] < 1:
                raise ConfigError(f"task.{key}", f"must be a positive integer, got {options[key]!r}")
        super().check_config(config)

    def _clusters(self, qids: list[str]) -> list[list[str]]:
        from ance_ir.modeling.kinds import load_model
        from ance_ir.modeling.resolve import require_local_model

        encoder = self.ctx.config.task.options["encoder"]
        if encoder:
            require_local_model(encoder, "task.encoder")
        model = load_model(encoder) if encoder else self.model
        vectors = model.encode_queries([self.ctx.data.queries[q] for q in qids])
        clusters = cluster_queries(vectors, qids, self.ctx.config.task.options["clusters"], self.ctx.config.seed)
        self.ctx.log.write({"step": 0, "event": "tas-clusters", "queries": len(qids), "clusters": len(clusters),
                            "largest": max(map(len, clusters)), "smallest": min(map(len, clusters))})
        return clusters

    @property
    def epochs_done(self) -> float:
        return self.draws.epochs_done


@register_task
class TASBTask(TASTask):
    """TAS with the teacher's margins balanced (TAS-B): one negative per query, pairs drawn by margin bin."""

    name = "tas-b"
    options = {**TASTask.options, "bins": 10}

    @classmethod
    def check_config(cls, config: Any) -> None:
        if config.data.source != "groups":
            raise ConfigError("task.name", "tas-b balances the teacher's margins: it needs data.source: groups with "
                                           "teacher scores (python -m ance_ir.rerank --groups)")
        if config.task.n_negatives != 1:
            raise ConfigError("task.n_negatives", "tas-b draws one (positive, negative) pair per query: 1")
        if config.negatives.name != "groups":
            raise ConfigError("negatives.name", f"tas-b draws its pairs from the groups' scored negatives "
                                                f"(negatives: groups), not {config.negatives.name!r}")
        if config.negatives.options.get("denoised_share") is not None:
            raise ConfigError("negatives.denoised_share", "tas-b's margin bins hold one list of negatives a query; "
                                                          "denoise_above alone applies")
        bins = config.task.options["bins"]
        if not isinstance(bins, int) or bins < 1:
            raise ConfigError("task.bins", f"must be a positive integer, got {bins!r}")
        super().check_config(config)

    def margin_bins(self) -> dict[str, list[list[tuple[str, str]]]]:
        """Each query's pairs of a positive and a negative of the groups sampler's pool (its top
        ``negatives.depth``, denoised with ``negatives.denoise_above``), binned by the teacher's margin."""
        data = self.ctx.data
        positives: dict[str, list[str]] = {}
        for qid, positive in data.pairs:
            positives.setdefault(qid, []).append(positive)
        bins = {qid: margin_bins(ps, self.sampler.pool(qid, data.exclude[qid]), data.scores.get(qid, {}),
                                 self.ctx.config.task.options["bins"])
                for qid, ps in positives.items()}
        bins = {qid: b for qid, b in bins.items() if b}
        if not bins:
            raise ValueError("tas-b: no query has a (positive, negative) pair scored by the teacher")
        return bins
