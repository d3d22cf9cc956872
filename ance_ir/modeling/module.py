"""The torch module a model kind's class builds on: the device its parameters are on, and the ``records()``
``save_pretrained`` writes for a kind whose settings are one JSON file."""

from __future__ import annotations

from typing import Any

import torch

from ance_ir.modeling.kinds import kind_records


class KindModule(torch.nn.Module):
    """Base of the built-in model kinds. A subclass names its ``kind``, its ``settings_file`` and gives its
    ``settings`` (what loading it again needs); ``records()`` is then the kind in ``ance_ir_model.json`` and the
    settings in ``settings_file``."""

    kind: str
    settings_file: str

    @property
    def device(self) -> torch.device:
        return next(self.parameters()).device

    @property
    def settings(self) -> dict[str, Any]:
        raise NotImplementedError(f"{type(self).__name__} gives no settings")

    def records(self) -> dict[str, dict[str, Any]]:
        """What ``save_pretrained`` records: the kind, and the settings in ``settings_file``."""
        return kind_records(self.kind, self.settings_file, self.settings)
