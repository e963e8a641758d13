"""How often `hpclaunch logs JOB --diagnose` names the right cause on real failure output (issue 33).

Every excerpt of the recorded-failure corpus (tests/fixtures/failures, SOURCES.md says where each came from) is put
where a real job writes it, the way tests/unit/test_diagnose_recorded.py does (its `place`: a rank's log among four
ranks that only trained, an msrun worker's log, or the job output), and diagnosed in-process with the job state the
class implies (TIMEOUT, PREEMPTED, NODE_FAIL, CANCELLED; else FAILED). A file counts as right when the diagnosis'
cause is its class (top-1). split.json says each file's class, part (dev or held_out), place and state.

Prints an 80-column table: per class and overall, the files and the right ones on the dev and the held-out part;
then the dev misses (file, what the diagnosis said instead, the line it read), and for the held-out part only
which classes were taken for which (class -> said, count): the held-out files must not be read to write or tune
rules (SOURCES.md). --held-out-misses prints them file by file, for the final report of a change, not while writing
rules. --json writes every result.

Usage: python benchmarks/diagnose_accuracy.py [--held-out-misses] [--json results.json]
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from collections import Counter, defaultdict
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from hpclaunch.logs.diagnose import diagnose  # noqa: E402
from hpclaunch.schedulers.base import JobStatus  # noqa: E402
from tests.unit.test_diagnose_recorded import FIXTURES, place  # noqa: E402

WIDTH = 80


def run_one(name: str, entry: dict) -> dict:
    """Diagnose one excerpt placed as split.json says; what the diagnosis said."""
    with tempfile.TemporaryDirectory() as tmp:
        run = place(Path(tmp) / "run", entry["where"], (FIXTURES / name).read_text())
        state = entry["state"]
        d = diagnose(run, "7", JobStatus("7", state, exit_code="1:0" if state == "FAILED" else "0:15"))
    return {"file": name, "class": entry["class"], "part": entry["part"], "origin": entry["origin"],
            "said": d.cause or "none",
            "title": d.title, "error": d.error or "", "right": d.cause == entry["class"]}


def cut(text: str, width: int) -> str:
    text = " ".join(text.split())
    return text if len(text) <= width else text[: width - 3] + "..."


def pct(right: int, n: int) -> str:
    return f"{100 * right / n:5.1f}" if n else "    -"


def table(results: list[dict]) -> list[str]:
    per: dict[str, dict[str, list[int]]] = defaultdict(lambda: {"dev": [0, 0], "held_out": [0, 0]})
    for r in results:
        cell = per[r["class"]][r["part"]]
        cell[0] += 1
        cell[1] += r["right"]
    head = f"{'class':<26}{'dev n':>7}{'right':>7}{'%':>7}   {'held n':>7}{'right':>7}{'%':>7}"
    lines = [head, "-" * WIDTH]
    total = {"dev": [0, 0], "held_out": [0, 0]}
    for cls in sorted(per):
        (dn, dr), (hn, hr) = per[cls]["dev"], per[cls]["held_out"]
        for part in total:
            total[part][0] += per[cls][part][0]
            total[part][1] += per[cls][part][1]
        lines.append(f"{cls:<26}{dn:>7}{dr:>7}{pct(dr, dn):>7}   {hn:>7}{hr:>7}{pct(hr, hn):>7}")
    (dn, dr), (hn, hr) = total["dev"], total["held_out"]
    lines += ["-" * WIDTH, f"{'overall':<26}{dn:>7}{dr:>7}{pct(dr, dn):>7}   {hn:>7}{hr:>7}{pct(hr, hn):>7}"]
    new = [r for r in results if r["part"] == "dev" and r["origin"] == "corpus"]
    n, right = len(new), sum(r["right"] for r in new)
    lines.append(f"{'dev, new files only':<26}{n:>7}{right:>7}{pct(right, n):>7}   (not the 63 rules came from)")
    return lines


def misses(results: list[dict], part: str) -> list[str]:
    lines = []
    missed = [r for r in results if r["part"] == part and not r["right"]]
    for r in sorted(missed, key=lambda r: (r["class"], r["file"])):
        lines.append(cut(f"{r['file']}  [{r['class']}]", WIDTH))
        lines.append(cut(f"    said {r['said']}: {r['error'] or r['title']}", WIDTH))
    return lines


def confusion(results: list[dict], part: str) -> list[str]:
    pairs = Counter((r["class"], r["said"]) for r in results if r["part"] == part and not r["right"])
    return [f"{cls:<26} -> {said:<26}{n:>4}" for (cls, said), n in sorted(pairs.items())]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--held-out-misses", action="store_true", help="list the held-out misses file by file")
    ap.add_argument("--json", type=Path, help="write every file's result here")
    args = ap.parse_args()
    manifest = json.loads((FIXTURES / "split.json").read_text())
    start = time.perf_counter()
    results = [run_one(name, entry) for name, entry in manifest["files"].items()]
    took = time.perf_counter() - start
    classes = {r["class"] for r in results}
    print(f"diagnose accuracy (top-1 cause) on {len(results)} recorded failures, {len(classes)} classes, "
          f"{took:.1f} s")
    print("\n".join(table(results)))
    print("\ndev misses: file [class], then what was said instead and the line read")
    print("\n".join(misses(results, "dev")) or "none")
    if args.held_out_misses:
        print("\nheld-out misses (for a change's final report; write no rules from them)")
        print("\n".join(misses(results, "held_out")) or "none")
    else:
        print("\nheld-out misses: class -> what was said (files: --held-out-misses)")
        print("\n".join(confusion(results, "held_out")) or "none")
    if args.json:
        args.json.write_text(json.dumps(results, indent=1) + "\n")


if __name__ == "__main__":
    main()
