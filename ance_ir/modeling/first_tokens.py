"""A BERT's last layer run for its first tokens alone, where nothing reads the other tokens' last states: a
cross-encoder's and a CLS-pooled encoder's CLS state, ME-BERT's first ``m`` passage states.

That layer's queries are the first tokens' only; its keys and values still come from every token and padding is
masked as in the whole forward, so the states are the whole forward's up to float rounding (in int8 a little
different: the layer's activations are quantised with the first tokens' scale alone) for about 1/L less work.
Only in eval mode: a model that trains runs whole, so its dropout draws stay as they were (what a training run
computes in eval mode, its refreshes' vectors or a MoCo key encoder's, changes by rounding).
"""

from __future__ import annotations

from collections.abc import Mapping

import torch
from transformers import BertForSequenceClassification, BertModel, PreTrainedModel
from transformers.models.bert.modeling_bert import BertLayer


def first_token_bert(model: torch.nn.Module, backbone: PreTrainedModel) -> BertModel | None:
    """The BERT encoder of ``backbone`` (a ``BertModel``, or the ``bert`` of a ``BertForSequenceClassification``)
    whose last layer may run for the first tokens alone: None while ``model`` or ``backbone`` trains, and for other
    architectures and relative position embeddings (attention scores of their own in transformers 4), which run
    whole."""
    if model.training or backbone.training:
        return None
    bert = backbone.bert if isinstance(backbone, BertForSequenceClassification) else backbone
    if not isinstance(bert, BertModel) or bert.config.is_decoder or not len(bert.encoder.layer):
        return None
    if type(bert.encoder.layer[-1]) is not BertLayer:  # a subclass's own layer: its computation is not known here
        return None
    if getattr(bert.config, "position_embedding_type", "absolute") != "absolute":
        return None
    return bert


def last_states(model: torch.nn.Module, backbone: PreTrainedModel, batch: Mapping[str, torch.Tensor],
                count: int) -> torch.Tensor:
    """``backbone``'s last states ``[B, T', H]`` of which only the first ``count`` are read: those alone
    (:func:`first_token_states`) where :func:`first_token_bert` allows, else every token's (``T' = T``)."""
    bert = first_token_bert(model, backbone)
    return first_token_states(bert, batch, count) if bert is not None else backbone(**batch).last_hidden_state


def first_token_states(bert: BertModel, batch: Mapping[str, torch.Tensor], count: int = 1) -> torch.Tensor:
    """``[B, min(count, T), H]``: the first ``count`` tokens' states after ``bert``'s last layer, that layer run for
    their queries alone. The encoder's layer list is swapped for the call (restored after it, on errors too), so
    two calls on one model must not run at once (nothing in the package does)."""
    layers = bert.encoder.layer
    bert.encoder.layer = layers[:-1]  # the states entering the last layer
    try:
        hidden = bert(**batch).last_hidden_state
    finally:
        bert.encoder.layer = layers
    last, first = layers[-1], hidden[:, :count]
    attention = last.attention.self
    rows, heads, size = hidden.shape[0], attention.num_attention_heads, attention.attention_head_size

    def split(states: torch.Tensor) -> torch.Tensor:
        return states.view(rows, -1, heads, size).transpose(1, 2)

    mask = batch.get("attention_mask")
    context = torch.nn.functional.scaled_dot_product_attention(
        split(attention.query(first)), split(attention.key(hidden)), split(attention.value(hidden)),
        attn_mask=None if mask is None else mask[:, None, None, :].bool(), scale=size ** -0.5)
    states = last.attention.output(context.transpose(1, 2).reshape(rows, first.shape[1], heads * size), first)
    return last.output(last.intermediate(states), states)
