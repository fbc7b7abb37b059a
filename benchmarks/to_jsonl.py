#!/usr/bin/env python3
"""Any trace lockcheck reads, written as JSON Lines: the JSONL case of `benchmarks/run.py`.

    python benchmarks/to_jsonl.py TRACE.lt OUT.jsonl

The events are read with lockcheck's own reader and written with the keys
`lockcheck/readers/jsonl.py` documents, defaults left out (as a producer
would write them), so the JSONL case checks the very events of the `.lt`
case: same findings, and its throughput compares reader against reader.
Prints the number of events written.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from lockcheck.readers import read_all  # noqa: E402
from lockcheck.readers.jsonl import to_json  # noqa: E402


def convert(src: str, dst: str) -> int:
    count = 0
    dumps = json.dumps
    with open(dst, "w", encoding="utf-8") as out:
        batch = []
        for ev in read_all([src]):
            batch.append(dumps(to_json(ev), ensure_ascii=False))
            count += 1
            if len(batch) >= 10000:
                out.write("\n".join(batch) + "\n")
                batch.clear()
        if batch:
            out.write("\n".join(batch) + "\n")
    return count


def main(argv: list[str]) -> int:
    src, dst = argv
    print(convert(src, dst))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
