"""A rank's start-up record (hpclaunch/runtime/train/startup.py): CPU seconds and heavy packages."""

from __future__ import annotations

import json
import subprocess
import sys

from hpclaunch.runtime.train import startup


def test_heavy_packages_lists_only_the_imported_ones_in_a_fixed_order():
    modules = {"torch": object(), "deepspeed.ops": object(), "json": object(), "numpy": object()}
    assert startup.heavy_packages(modules) == ["numpy", "torch"]  # a submodule alone is not the package


def test_usage_in_a_fresh_process_counts_its_own_cpu_and_age():
    code = ("import json, time; t = time.process_time()\nwhile time.process_time() - t < 0.3: pass\n"
            "from hpclaunch.runtime.train import startup; print(json.dumps(startup.usage()))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=60)
    rec = json.loads(out.stdout)
    assert rec["cpu_s"] >= 0.3 and abs(rec["cpu_s"] - rec["user_s"] - rec["sys_s"]) < 0.002
    assert rec["wall_s"] is not None and rec["wall_s"] >= 0.25  # /proc: the process has lived at least that long
    assert rec["packages"] == []  # nothing heavy imported by the loop above
