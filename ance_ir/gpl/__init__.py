"""GPL: a dense retriever adapted to a corpus with generated queries and cross-encoder pseudo labels
(``python -m ance_ir.gpl``)."""
