"""``python -m ance_ir.datasets list|fetch NAME``."""

from __future__ import annotations

import json

from ance_ir.cli import ArgumentParser, run_cli
from ance_ir.datasets import anserini
from ance_ir.datasets.registry import DATASETS, RAG24_SPLITS, dataset_dir, fetch


def main(argv: list[str] | None = None) -> int:
    parser = ArgumentParser(prog="python -m ance_ir.datasets", description=__doc__)
    sub = parser.add_subparsers(dest="command", required=True)
    sub.add_parser("list", help="list datasets and topic/qrels names")
    fetch_p = sub.add_parser("fetch", help="download and prepare a dataset")
    fetch_p.add_argument("name", choices=sorted(DATASETS))
    fetch_p.add_argument("--force", action="store_true", help="rebuild even if cached")
    args = parser.parse_args(argv)

    if args.command == "fetch":
        folder = fetch(args.name, force=args.force)
        print(json.dumps(json.loads((folder / "manifest.json").read_text()), indent=2))
        print(f"ready: {folder}")
        return 0
    print("datasets (corpus + topics + qrels):")
    for name, description in DATASETS.items():
        state = "fetched" if (dataset_dir(name) / "manifest.json").is_file() else "not fetched"
        print(f"  {name:28s} {description} [{state}]")
    print("topics/qrels names:")
    for name in RAG24_SPLITS:
        print(f"  {name}")
    for name in anserini.FILES:
        aliases = [a for a, target in anserini.ALIASES.items() if target == name]
        print(f"  {name}" + (f" (alias: {', '.join(aliases)})" if aliases else ""))
    print("also: DIR or DIR:SPLIT, a dataset folder in BEIR layout (corpus.jsonl, queries.jsonl, qrels/SPLIT.tsv;\n"
          "  DIR alone is the test split), and irds:NAME through the ir_datasets package (pip install ir_datasets)")
    return 0


if __name__ == "__main__":
    run_cli(main)
