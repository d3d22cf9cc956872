"""``log.jsonl``: one JSON object a line, either a training record (has ``loss``) or an event (has ``event``).

Every line has ``step`` and ``time`` (Unix seconds). A resumed run first drops the lines after the step
it resumes from, so the log reads like one uninterrupted run plus a ``resume`` event.
"""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

from ance_ir.data import InputError, atomic_write
from ance_ir.data.lines import json_object, read_text


class RunLog:
    """Append-only JSONL writer (disabled on ranks other than 0)."""

    def __init__(self, path: str | Path, enabled: bool = True):
        self.path, self.enabled = Path(path), enabled

    def write(self, record: dict[str, Any]) -> None:
        if not self.enabled:
            return
        self.path.parent.mkdir(parents=True, exist_ok=True)
        with open(self.path, "a", encoding="utf-8") as f:
            f.write(json.dumps({**record, "time": round(time.time(), 3)}) + "\n")

    def rewind(self, step: int) -> None:
        """Keep only the complete lines with ``step`` <= ``step`` (a killed run may have logged further)."""
        if not self.enabled or not self.path.is_file():
            return
        kept = []
        for line in self.path.read_text(encoding="utf-8").splitlines():
            try:
                if json.loads(line)["step"] <= step:
                    kept.append(line)
            except (json.JSONDecodeError, KeyError, TypeError):
                continue
        with atomic_write(self.path) as f:
            f.writelines(line + "\n" for line in kept)


def read_log(path: str | Path) -> list[dict[str, Any]]:
    """All records of a ``log.jsonl``; a last line still being written (no newline yet) is skipped."""
    path = Path(path)
    if not path.is_file():
        raise InputError(path, "no such training log")
    text = read_text(path)
    lines = text.split("\n")
    if lines and lines[-1] == "":
        lines.pop()
    elif lines:
        lines.pop()  # unterminated: still being written
    records = []
    for lineno, line in enumerate(lines, start=1):
        if not line.strip():
            continue
        record = json_object(path, lineno, line)
        if "step" not in record:
            raise InputError(path, 'expected an object with a "step"', lineno)
        records.append(record)
    return records
