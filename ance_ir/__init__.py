"""ance-ir: train and serve ANCE dense retrievers on top of Pyserini."""

from ance_ir.bootstrap import bootstrap_pyserini

bootstrap_pyserini()

__version__ = "0.1.0"
