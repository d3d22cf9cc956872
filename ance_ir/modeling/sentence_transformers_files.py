"""sentence-transformers files in a saved DenseEncoder folder, so ``SentenceTransformer(path)`` gives its vectors.

Written by :meth:`~ance_ir.modeling.DenseEncoder.save_pretrained` next to the Hugging Face files; nothing
here is read back by ``DenseEncoder.from_pretrained`` (it loads ``ance_ir_encoder.json``, the backbone's
``config.json`` + weights, ``ance_ir_head.safetensors`` and the top-level tokenizer). The layout uses the
classic module names (``sentence_transformers.models.*``) and legacy config keys that sentence-transformers
has read for years and still maps in 6.x; only pure JSON and safetensors are written, so sentence-transformers
need not be installed to save.

Shared tower (one module chain)::

    modules.json                       Transformer -> Pooling [-> Dense -> LayerNorm] [-> Normalize]
    sentence_bert_config.json          max_seq_length = passage_max_length, do_lower_case false
    config_sentence_transformers.json  prompts {"query": query_prefix, "document": passage_prefix},
                                       default_prompt_name "document" when there is a passage prefix,
                                       similarity_fn_name "dot"
    1_Pooling/config.json              cls or mean pooling over the backbone's hidden size
    2_Dense/, 3_LayerNorm/             the ANCE head (Linear with identity activation, then LayerNorm)
    N_Normalize/                       when ``normalize``

``model.encode(texts)`` / ``encode_document`` reproduce ``encode_passages``; ``encode_query`` adds the query
prefix but cuts at the one ``max_seq_length`` (the passage length), so queries longer than
``query_max_length`` tokens differ unless ``model.max_seq_length = query_max_length`` is set first.

Separate towers: a ``Router`` (sentence-transformers >= 5) with a ``query`` and a ``document`` route, each
``Transformer -> Pooling [-> Dense -> LayerNorm]`` over that tower's own folder (``query/``, ``passage/``,
which get a ``sentence_bert_config.json`` with their own max length and a copy of the tokenizer), then
``Normalize``; ``encode_query`` takes the query route, ``encode`` / ``encode_document`` the passage route.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import torch
from safetensors.torch import save_file
from transformers import PreTrainedTokenizerBase

from ance_ir.modeling.config import EncoderConfig

MODULES_NAME = "modules.json"
ST_CONFIG_NAME = "config_sentence_transformers.json"
TRANSFORMER_CONFIG_NAME = "sentence_bert_config.json"
ROUTER_CONFIG_NAME = "router_config.json"
_ST = "sentence_transformers.models."


def _write_json(path: Path, data: Any) -> None:
    path.write_text(json.dumps(data, indent=2) + "\n", encoding="utf-8")


def _pooling_config(pooling: str, hidden_size: int) -> dict[str, Any]:
    return {
        "word_embedding_dimension": hidden_size,
        "pooling_mode_cls_token": pooling == "cls",
        "pooling_mode_mean_tokens": pooling == "mean",
        "pooling_mode_max_tokens": False,
        "pooling_mode_mean_sqrt_len_tokens": False,
        "pooling_mode_weightedmean_tokens": False,
        "pooling_mode_lasttoken": False,
        "include_prompt": True,
    }


def _save_weights(folder: Path, tensors: Mapping[str, torch.Tensor]) -> None:
    save_file({k: v.detach().float().cpu().contiguous() for k, v in tensors.items()}, folder / "model.safetensors")


def _write_chain(directory: Path, names: list[str], pooling: str, hidden_size: int,
                 head: torch.nn.Sequential | None) -> list[tuple[str, str]]:
    """Write Pooling [+ Dense + LayerNorm] into ``directory/NAME``; return ``(folder name, module type)`` rows."""
    rows = [(names[0], "Pooling")]
    (directory / names[0]).mkdir()
    _write_json(directory / names[0] / "config.json", _pooling_config(pooling, hidden_size))
    if head is not None:
        linear, norm = head[0], head[1]
        if not isinstance(linear, torch.nn.Linear) or not isinstance(norm, torch.nn.LayerNorm) or (
                norm.eps != 1e-5 or not norm.elementwise_affine):
            raise ValueError("the ANCE head must be Linear then LayerNorm(eps=1e-5) to be written as "
                             "sentence-transformers Dense and LayerNorm modules")
        dense, layer_norm = directory / names[1], directory / names[2]
        dense.mkdir()
        _write_json(dense / "config.json", {
            "in_features": linear.in_features, "out_features": linear.out_features, "bias": linear.bias is not None,
            "activation_function": "torch.nn.modules.linear.Identity"})
        _save_weights(dense, {"linear." + k: v for k, v in linear.state_dict().items()})
        layer_norm.mkdir()
        _write_json(layer_norm / "config.json", {"dimension": linear.out_features})
        _save_weights(layer_norm, {"norm." + k: v for k, v in norm.state_dict().items()})
        rows += [(names[1], "Dense"), (names[2], "LayerNorm")]
    return rows


def _transformer_config(max_length: int) -> dict[str, Any]:
    return {"max_seq_length": max_length, "do_lower_case": False}


def write_sentence_transformers_files(directory: str | Path, config: EncoderConfig, towers: Mapping[str, Any],
                                      tokenizer: PreTrainedTokenizerBase) -> None:
    """Write the sentence-transformers module files for a DenseEncoder saved in ``directory``.

    ``towers`` maps ``query`` (and ``passage`` for separate towers) to the :class:`~ance_ir.modeling.Tower`
    (its ``backbone`` and ``head``); the backbones must already be saved (in ``directory``, or in
    ``directory/query`` and ``directory/passage``).
    """
    directory = Path(directory)
    _write_json(directory / ST_CONFIG_NAME, {
        "model_type": "SentenceTransformer",
        "prompts": {"query": config.query_prefix, "document": config.passage_prefix},
        "default_prompt_name": "document" if config.passage_prefix else None,
        "similarity_fn_name": "dot",
    })
    if config.shared:
        rows = [("", "Transformer")]
        _write_json(directory / TRANSFORMER_CONFIG_NAME, _transformer_config(config.passage_max_length))
        tower = towers["query"]
        rows += _write_chain(directory, ["1_Pooling", "2_Dense", "3_LayerNorm"], config.pooling,
                             tower.backbone.config.hidden_size, tower.head)
    else:
        types: dict[str, str] = {}
        structure: dict[str, list[str]] = {}
        for side, route, max_length in (("query", "query", config.query_max_length),
                                        ("passage", "document", config.passage_max_length)):
            _write_json(directory / side / TRANSFORMER_CONFIG_NAME, _transformer_config(max_length))
            tokenizer.save_pretrained(directory / side)
            chain = [(side, "Transformer")]
            chain += _write_chain(directory, [f"{side}_1_Pooling", f"{side}_2_Dense", f"{side}_3_LayerNorm"],
                                  config.pooling, towers[side].backbone.config.hidden_size, towers[side].head)
            types.update({name: _ST + kind for name, kind in chain})
            structure[route] = [name for name, _ in chain]
        _write_json(directory / ROUTER_CONFIG_NAME, {
            "types": types, "structure": structure,
            "parameters": {"default_route": "document", "allow_empty_key": True}})
        rows = [("", "Router")]
    if config.normalize:
        name = f"{len(rows)}_Normalize"
        (directory / name).mkdir()
        rows.append((name, "Normalize"))
    _write_json(directory / MODULES_NAME, [{"idx": i, "name": str(i), "path": path, "type": _ST + kind}
                                           for i, (path, kind) in enumerate(rows)])
