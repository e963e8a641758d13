"""A rank's start-up record (hpclaunch/runtime/train/startup.py): CPU seconds and heavy packages."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from hpclaunch.runtime.train import startup

REPO = Path(__file__).resolve().parents[2]


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


def test_the_runtime_and_the_torch_recipes_import_no_training_library_at_module_import():
    """A recipe's script starts by importing the runtime: torch and numpy, nothing else heavy. transformers comes with
    the tokenizer and model, DeepSpeed with its launcher's engine (checked on real runs in
    tests/integration/test_recipes_tiny.py)."""
    # dscheckpoint is DeepSpeed's checkpoint engine: imported by the DeepSpeed engine only, after deepspeed itself
    code = ("import importlib, json, pkgutil, runpy\nimport hpclaunch.runtime.train as t\n"
            "for m in pkgutil.iter_modules(t.__path__):\n"
            "    if m.name != 'dscheckpoint': importlib.import_module(f'hpclaunch.runtime.train.{m.name}')\n"
            "for r in ('gpt2', 'bert_large', 'mixtral'): runpy.run_path(f'recipes/{r}/train.py', run_name='recipe')\n"
            "from hpclaunch.runtime.train import startup; print(json.dumps(startup.heavy_packages()))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300, cwd=REPO)
    assert out.returncode == 0, out.stderr[-3000:]
    assert json.loads(out.stdout.splitlines()[-1]) == ["numpy", "torch"]
