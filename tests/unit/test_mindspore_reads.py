"""recipes/gpt_mindspore's script declares the train and model.config keys it reads (READS); submit refuses every
other key of those sections before queueing, saying where it was set and which keys are read.

The declaration is checked against the code: every read of the train section (always named `t` in the script)
and of model.config (always `mc`) is a constant key, `X["key"]` or `X.get("key", ...)`, or the whole section
handed to a function of the script whose parameter has the same name; the keys read are exactly the declared
ones (train.grad_accum and train.global_batch_size reach the script as the job's grad_accum).
"""

from __future__ import annotations

import ast
import shutil
from pathlib import Path

import pytest
import yaml

from hpclaunch.errors import ConfigError
from hpclaunch.submission import mindspore

REPO = Path(__file__).resolve().parents[2]
RECIPE = REPO / "recipes" / "gpt_mindspore"
SCRIPT = RECIPE / "train.py"
SECTIONS = {"t": "train", "mc": "model.config"}
BINDINGS = {"t": "cfg['recipe']['train']", "mc": "recipe['model']['config']"}  # as ast.unparse writes them
VIA_JOB = {"grad_accum", "global_batch_size"}  # resolved into the job's grad_accum, which the script reads


def _parents(tree: ast.AST) -> dict[ast.AST, ast.AST]:
    return {child: node for node in ast.walk(tree) for child in ast.iter_child_nodes(node)}


def _str(node: ast.AST | None) -> str | None:
    return node.value if isinstance(node, ast.Constant) and isinstance(node.value, str) else None


def _handed_on(node: ast.Name, call: ast.Call, functions: dict[str, list[str]]) -> bool:
    """`node` is a positional argument of a call to a function of the script whose parameter there has its name."""
    callee = call.func.id if isinstance(call.func, ast.Name) else None
    params = functions.get(callee or "", [])
    index = call.args.index(node) if node in call.args else -1
    return 0 <= index < len(params) and params[index] == node.id


def script_reads(tree: ast.Module) -> tuple[dict[str, set[str]], list[str]]:
    """(section -> keys the code reads, uses of a section that are not a constant read)."""
    parents = _parents(tree)
    functions = {f.name: [a.arg for a in f.args.args] for f in ast.walk(tree) if isinstance(f, ast.FunctionDef)}
    classes = {c.name: [a.arg for a in f.args.args][1:] for c in ast.walk(tree) if isinstance(c, ast.ClassDef)
               for f in c.body if isinstance(f, ast.FunctionDef) and f.name == "__init__"}
    functions.update(classes)
    reads: dict[str, set[str]] = {section: set() for section in SECTIONS.values()}
    odd = []
    for node in ast.walk(tree):
        if not (isinstance(node, ast.Name) and node.id in SECTIONS):
            continue
        parent = parents[node]
        if isinstance(node.ctx, ast.Store):
            value = parent.value if isinstance(parent, ast.Assign) else None
            if isinstance(parent, ast.Tuple) and isinstance(parents[parent], ast.Assign):
                assign = parents[parent]
                value = assign.value.elts[parent.elts.index(node)] if isinstance(assign.value, ast.Tuple) else None
            if value is None or ast.unparse(value) != BINDINGS[node.id]:
                odd.append(f"line {node.lineno}: {node.id} bound to something else than {BINDINGS[node.id]}")
            continue
        if isinstance(parent, ast.arg):
            continue
        key = None
        if isinstance(parent, ast.Subscript) and parent.value is node:
            key = _str(parent.slice)
        elif isinstance(parent, ast.Attribute) and parent.attr == "get":
            call = parents[parent]
            key = _str(call.args[0]) if isinstance(call, ast.Call) and call.func is parent and call.args else None
        elif isinstance(parent, ast.Call) and _handed_on(node, parent, functions):
            continue
        if key is None:
            odd.append(f"line {node.lineno}: {ast.unparse(parent)}")
        else:
            reads[SECTIONS[node.id]].add(key)
    job_reads = {_str(n.slice) for n in ast.walk(tree)
                 if isinstance(n, ast.Subscript) and ast.unparse(n.value) == "cfg"}
    job_reads |= {_str(n.args[0]) for n in ast.walk(tree) if isinstance(n, ast.Call) and n.args
                  and ast.unparse(n.func) == "cfg.get"}
    if "grad_accum" in job_reads:
        reads["train"] |= VIA_JOB
    return reads, odd


def test_the_declaration_is_what_the_script_reads():
    tree = ast.parse(SCRIPT.read_text(encoding="utf-8"))
    reads, odd = script_reads(tree)
    assert not odd, "reads of train/model.config this test cannot follow (use t[...]/t.get/mc[...]/mc.get):\n" + \
        "\n".join(odd)
    declared = mindspore.declared_reads(SCRIPT)
    assert declared is not None
    assert {section: set(keys) for section, keys in declared.items()} == reads
    assert len(declared["train"]) == len(set(declared["train"]))  # no key twice


def test_the_reads_check_sees_a_read_the_declaration_lacks(tmp_path):
    """The check above fails when the code reads a key READS leaves out (the drift it exists for)."""
    text = SCRIPT.read_text(encoding="utf-8").replace('t.get("dropout")', 't.get("dropout") or t["num_workers"]')
    reads, _ = script_reads(ast.parse(text))
    assert "num_workers" in reads["train"]
    declared = mindspore.declared_reads(SCRIPT)
    assert declared is not None and "num_workers" not in declared["train"]


def _error(hpclaunch, hpc_home, *args: str) -> str:
    result = hpclaunch("submit", *args)
    assert result.exit_code == 2, result.output
    assert "Traceback" not in result.output
    assert not (hpc_home / "runs").exists() or not list((hpc_home / "runs").iterdir())
    return result.stderr


@pytest.mark.parametrize("dry_run", [(), ("--dry-run",)])
def test_a_key_the_script_never_reads_is_refused_before_queueing(hpclaunch, hpc_home, dry_run):
    err = _error(hpclaunch, hpc_home, str(RECIPE), "--profile", "local", "--preset", "tiny", *dry_run,
                 "--set", "train.compile=false")
    assert ("hpclaunch: error: train.compile (--set train.compile=false): recipe gpt_mindspore's script train.py "
            "never reads this key: it would have no effect") in err
    assert "hint: leave it out (train.compile: the script runs in MindSpore's PyNative mode" in err
    assert f"The keys it reads (READS in {SCRIPT}): train: micro_batch_size, grad_accum, global_batch_size, " in err
    assert "; model.config: num_layers, hidden_size, " in err


def test_every_unread_key_is_named_with_where_it_was_set(hpclaunch, hpc_home, tmp_path):
    folder = tmp_path / "gpt_mindspore"
    shutil.copytree(RECIPE, folder)
    data = yaml.safe_load((folder / "recipe.yaml").read_text())
    data["train"]["num_workers"] = 2
    data["presets"]["tiny"]["model"]["config"]["fp16_lm_cross_entropy"] = True
    (folder / "recipe.yaml").write_text(yaml.safe_dump(data))
    err = _error(hpclaunch, hpc_home, str(folder), "--profile", "local", "--preset", "tiny", "--dry-run",
                 "--set", "train.activation_checkpointing=true")
    file = folder / "recipe.yaml"
    assert (f"train.num_workers ({file}), train.activation_checkpointing (--set train.activation_checkpointing=true), "
            f"model.config.fp16_lm_cross_entropy ({file} (presets.tiny)): recipe gpt_mindspore's script train.py never "
            "reads these keys: they would have no effect") in err
    assert "hint: leave them out (train.activation_checkpointing: set parallel.recompute=true instead" in err


def test_a_resolved_yaml_holds_trains_defaults_and_passes_unless_edited(hpclaunch, hpc_home):
    """A run directory's resolved.yaml lists every train key, read or not (their defaults): submitted again it passes;
    a hand edit that sets a key the script never reads is refused, naming that file."""
    done = hpclaunch("submit", str(RECIPE), "--profile", "local", "--preset", "tiny", "--dry-run")
    assert done.exit_code == 0, done.output
    resolved = next((hpc_home / "runs").glob("*/resolved.yaml"))
    assert "compile: false" in resolved.read_text()
    again = hpclaunch("submit", str(resolved), "--dry-run")
    assert again.exit_code == 0, again.output
    resolved.write_text(resolved.read_text().replace("compile: false", "compile: true"))
    again = hpclaunch("submit", str(resolved), "--dry-run")
    assert again.exit_code == 2 and "Traceback" not in again.output
    assert f"train.compile ({resolved}): recipe gpt_mindspore's script train.py never reads this key" in again.stderr


def test_every_bundled_preset_sets_only_keys_the_script_reads():
    data = yaml.safe_load((RECIPE / "recipe.yaml").read_text())
    for preset in data["presets"]:
        layers = [("recipe.yaml", data), (f"presets.{preset}", data["presets"][preset])]
        mindspore.check_reads("gpt_mindspore", SCRIPT, layers)


def test_a_script_without_a_declaration_is_not_checked_and_a_broken_one_is_refused(tmp_path):
    script = tmp_path / "train.py"
    script.write_text("print('mine')\n")
    mindspore.check_reads("mine", script, [("--set train.compile=true", {"train": {"compile": True}})])
    script.write_text("READS = {'train': sorted(['lr'])}\n")
    with pytest.raises(ConfigError, match=r"READS \(line 1\) must be a literal mapping of section to key names"):
        mindspore.check_reads("mine", script, [])
