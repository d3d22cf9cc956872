"""A negative sampler from outside the package: always the top candidates of a candidate source, no sampling."""

from ance_ir.train.negatives import SourceNegatives, register_negatives


@register_negatives
class HardestNegatives(SourceNegatives):
    name = "test-hardest"

    def sample(self, qid, exclude, n, rng):
        chosen = [d for d in self.candidates.get(qid, ()) if d not in exclude][:n]
        return self.random_fill(qid, chosen, exclude, n, rng)
