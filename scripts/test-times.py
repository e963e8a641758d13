#!/usr/bin/env python3
"""Where a test run's time went, from pytest's JUnit XML (`scripts/test.sh --junitxml=run.xml`):

    python3 scripts/test-times.py run.xml [--top 15]

prints a Markdown table (docs/testing.md): each integration file's seconds (the sum of its tests' set-up, call and
tear-down) and test count, the unit tests as one line, then the slowest tests. On xdist workers the files overlap:
the sum is the work, not the wall time (pytest's own summary line has that)."""

from __future__ import annotations

import argparse
import sys
import xml.etree.ElementTree as ET
from collections import defaultdict


def per_test(path: str) -> list[tuple[str, float]]:
    """(file::name, seconds) of every test case."""
    out = []
    for case in ET.parse(path).getroot().iter("testcase"):
        where = case.get("classname", "").replace(".", "/")
        out.append((f"{where}.py::{case.get('name')}", float(case.get("time") or 0)))
    return out


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("junit")
    p.add_argument("--top", type=int, default=15, help="the slowest tests to list (default 15)")
    args = p.parse_args(argv)
    tests = per_test(args.junit)
    files: dict[str, list[float]] = defaultdict(list)
    for name, seconds in tests:
        path = name.split("::")[0]
        files["tests/unit (all files)" if path.startswith("tests/unit/") else path].append(seconds)
    print("| file | tests | seconds |")
    print("| --- | ---: | ---: |")
    for path, times in sorted(files.items(), key=lambda kv: -sum(kv[1])):
        print(f"| {path} | {len(times)} | {sum(times):.0f} |")
    print(f"| **all** | {len(tests)} | {sum(s for _, s in tests):.0f} |")
    print()
    print("| slowest tests | seconds |")
    print("| --- | ---: |")
    for name, seconds in sorted(tests, key=lambda t: -t[1])[:args.top]:
        print(f"| {name} | {seconds:.0f} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
