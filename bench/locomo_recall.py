"""LoCoMo retrieval benchmark: evidence recall vs context cost, written to docs/benchmarks.md.

Usage: .venv/bin/python bench/locomo_recall.py [--embedder minilm] [--samples conv-26 conv-30] [--store PATH]
       [--json OUT.json] [--no-doc]
"""

from __future__ import annotations

import argparse
import json
import shlex
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


def main(argv: list[str] | None = None) -> int:
    from m3agent.bench.locomo.doc import write_locomo_section
    from m3agent.bench.locomo.run import run_locomo
    from m3agent.errors import M3AgentError
    from m3agent.settings import load_settings

    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--embedder", default=None, help="text embedder (default: settings, i.e. minilm)")
    parser.add_argument("--samples", nargs="*", default=None, help="LoCoMo sample ids (default: all 10)")
    parser.add_argument("--store", default=None, help="store (default: <cache>/bench/locomo-v<format>-<embedder>.db)")
    parser.add_argument("--data", default=None, help="path of locomo10.json (default: ../shared/data/locomo)")
    parser.add_argument("--json", default=None, help="also write the full result as JSON here")
    parser.add_argument("--no-doc", action="store_true", help="do not update docs/benchmarks.md")
    args = parser.parse_args(argv)
    try:
        settings = load_settings(embedder=args.embedder, shared_dir=REPO.parent / "shared")
        result = run_locomo(
            settings, retrieval_only=True, data_path=args.data, store_path=args.store, sample_ids=args.samples
        )
    except M3AgentError as exc:
        print(f"error: {exc.message}\nhint: {exc.hint}", file=sys.stderr)
        return exc.exit_code
    if args.json:
        Path(args.json).write_text(json.dumps(result, indent=2) + "\n", encoding="utf-8")
    if not args.no_doc:
        command = ".venv/bin/python bench/locomo_recall.py " + shlex.join(
            _recorded(argv if argv is not None else sys.argv[1:])
        )
        write_locomo_section(REPO / "docs" / "benchmarks.md", result, command.strip())
    print(json.dumps({k: result[k] for k in ("overall", "targets", "latency_ms")}, indent=2))
    return 0


def _recorded(args: list[str]) -> list[str]:
    """The arguments that shape the figures (``--json`` only saves a copy, ``--no-doc`` is moot here)."""
    out, skip = [], False
    for arg in args:
        if skip:
            skip = False
        elif arg == "--json":
            skip = True
        elif not arg.startswith("--json="):
            out.append(arg)
    return out


if __name__ == "__main__":
    raise SystemExit(main())
