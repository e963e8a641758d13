"""The recorded-failure corpus (tests/fixtures/failures) is whole: every file has a row in SOURCES.md with its class,
part and source, and an entry in split.json; enough files and classes; a held-out part of at least 30 % that the
rules were not written from. benchmarks/diagnose_accuracy.py measures the diagnosis on it."""

from __future__ import annotations

import json
import re
from pathlib import Path

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "failures"
ROW = re.compile(r"^\| `(?P<file>[^`]+\.log)` \| (?P<cls>[a-z_]+) \| (?P<part>dev|held_out) \| (?P<source>[^|]+) \| "
                 r"(?P<date>[^|]+) \| (?P<what>[^|].*) \|$", re.MULTILINE)


def manifest() -> dict[str, dict]:
    return json.loads((FIXTURES / "split.json").read_text())["files"]


def test_every_file_is_in_split_json_and_sources_md() -> None:
    files = {str(p.relative_to(FIXTURES)) for p in FIXTURES.rglob("*.log")}
    entries = manifest()
    assert files == set(entries), sorted(files ^ set(entries))
    rows = {m["file"]: m for m in ROW.finditer((FIXTURES / "SOURCES.md").read_text())}
    assert set(rows) == files, sorted(files ^ set(rows))
    for name, row in rows.items():
        assert row["source"].startswith("https://"), (name, row["source"])
        assert (row["cls"], row["part"]) == (entries[name]["class"], entries[name]["part"]), name
        assert row["date"].strip() and row["what"].strip(), name


def test_size_classes_and_held_out_part() -> None:
    entries = manifest()
    assert len(entries) >= 120
    assert len({e["class"] for e in entries.values()}) >= 30
    parts = [e["part"] for e in entries.values()]
    assert set(parts) == {"dev", "held_out"}  # one part per file: a file is in exactly one
    assert parts.count("held_out") >= 0.3 * len(parts)
    # the files the rules were written from cannot measure them
    assert all(e["part"] == "dev" for e in entries.values() if e["origin"] == "earlier")


def test_entries_say_where_and_how_the_job_ended() -> None:
    implied = {"slurm_timeout": "TIMEOUT", "preempted": "PREEMPTED", "node_fail": "NODE_FAIL", "cancelled": "CANCELLED"}
    for name, e in manifest().items():
        assert re.fullmatch(r"job|(rank|only|msrun):\d", e["where"]), (name, e["where"])
        assert e["state"] == implied.get(e["class"], "FAILED"), name
        assert e["origin"] in ("earlier", "corpus"), name
        lines = (FIXTURES / name).read_text().splitlines()
        assert 1 <= len(lines) <= 40 and any(line.strip() for line in lines), name
