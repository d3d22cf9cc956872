"""Collect the acceptance lines of every section of docs/bench.md into its summary section.

    python -m bench.summary --output docs/bench.md
"""

from __future__ import annotations

import argparse
import re
from pathlib import Path

from bench.common import write_section

SECTION = re.compile(r"<!-- (?P<marker>[^/][^>]*?) -->\n(?P<body>.*?)<!-- /(?P=marker) -->", re.S)


def acceptance_lines(text: str) -> list[tuple[str, str]]:
    """(section heading, acceptance line) for every ``Acceptance...`` line inside a marked section."""
    out = []
    for match in SECTION.finditer(text):
        body = match["body"]
        heading = next((line.lstrip("# ").strip() for line in body.splitlines() if line.startswith("#")),
                       match["marker"])
        out += [(heading, line.strip()) for line in body.splitlines() if line.startswith("Acceptance")]
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--output", default="docs/bench.md")
    args = parser.parse_args()
    lines = acceptance_lines(Path(args.output).read_text(encoding="utf-8"))
    body = ("The acceptance lines of the sections below, collected by `python -m bench.summary` (rerun it after "
            "a benchmark):\n\n" + "\n".join(f"- {line} *({heading})*" for heading, line in lines) + "\n")
    print(body)
    write_section(args.output, "summary", body)


if __name__ == "__main__":
    main()
