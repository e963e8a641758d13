"""`hpclaunch export` refuses clearly (exit 2, what and where) when there is nothing to export or the folder
is taken, and exports a real DDP checkpoint (the `state.pt` the runtime writes) as a folder transformers
loads. The ZeRO-3 path runs in tests/integration/test_recipes_tiny.py on real DeepSpeed shards."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from hpclaunch.state import registry


def _record(run_dir: Path, job_id: str = "local-7") -> str:
    registry.add(registry.JobRecord(job_id=job_id, scheduler="local", profile="local", recipe="gpt2", preset="tiny",
                                    launcher="torchrun", layout="1n2g", name="gpt2", run_dir=str(run_dir),
                                    submitted_at="2026-11-23T00:00:00+0000"))
    return job_id


def _gpt2_run(run_dir: Path, steps: tuple[int, ...] = (4, 8)) -> object:
    """A run directory as the runtime leaves it: RUN_DIR/model/ and checkpoints/step-N/state.pt."""
    import torch
    from transformers import GPT2Config, GPT2LMHeadModel

    torch.manual_seed(0)
    model = GPT2LMHeadModel(GPT2Config(n_layer=1, n_embd=32, n_head=2, n_positions=32, vocab_size=64))
    model.config.save_pretrained(run_dir / "model")
    for step in steps:
        ckpt = run_dir / "checkpoints" / f"step-{step:08d}"
        ckpt.mkdir(parents=True)
        torch.save({"model": model.state_dict(), "client": {"step": step}}, ckpt / "state.pt")
    return model


def test_a_ddp_checkpoint_exports_to_a_folder_transformers_loads(hpclaunch, hpc_home, tmp_path):
    import torch
    from transformers import AutoModelForCausalLM

    run_dir = tmp_path / "run"
    model = _gpt2_run(run_dir)
    job = _record(run_dir)
    result = hpclaunch("export", job, "--step", "4", "--json")
    assert result.exit_code == 0, result.output
    done = json.loads(result.stdout)
    assert done["step"] == 4 and done["folder"] == str(run_dir / "export" / "step-00000004")
    assert done["params"] == sum(p.numel() for p in model.parameters())  # tied embedding counted once
    loaded, info = AutoModelForCausalLM.from_pretrained(done["folder"], output_loading_info=True)
    assert not info["missing_keys"] and not info["unexpected_keys"]
    from safetensors import safe_open

    with safe_open(f"{done['folder']}/model.safetensors", "pt") as f:  # the tied head under the embedding's
        assert "transformer.wte.weight" in f.keys() and "lm_head.weight" not in f.keys()  # name: 4.x loads it
    for (name, a), b in zip(model.state_dict().items(), loaded.state_dict().values(), strict=True):
        assert torch.equal(a, b), name
    assert not list(run_dir.joinpath("export").glob(".*partial"))


def test_export_names_the_newest_checkpoint_by_default(hpclaunch, hpc_home, tmp_path):
    run_dir = tmp_path / "run"
    _gpt2_run(run_dir)
    out = tmp_path / "hf"
    result = hpclaunch("export", _record(run_dir), "-o", str(out))
    assert result.exit_code == 0, result.output
    assert "exported step 8" in result.output and (out / "config.json").is_file()


@pytest.mark.parametrize(("setup", "args", "words"), [
    ("no-checkpoint", (), "no checkpoint"),
    ("two-steps", ("--step", "5"), "no checkpoint of step 5"),
    ("two-steps", ("-o", "{taken}"), "exists and is not an empty folder"),
    ("no-config", (), "model config"),
])
def test_export_refuses_with_a_clear_error(hpclaunch, hpc_home, tmp_path, setup, args, words):
    run_dir = tmp_path / "run"
    if setup == "no-checkpoint":
        (run_dir / "model").mkdir(parents=True)
        (run_dir / "model" / "config.json").write_text("{}")
    else:
        _gpt2_run(run_dir)
    if setup == "no-config":
        (run_dir / "model" / "config.json").unlink()
    taken = tmp_path / "taken"
    taken.mkdir()
    (taken / "x").write_text("mine")
    result = hpclaunch("export", _record(run_dir), *(a.format(taken=taken) for a in args))
    assert result.exit_code == 2, result.output
    assert result.stderr.startswith("hpclaunch: error: ") and words in result.stderr, result.stderr
    assert "Traceback" not in result.output
    assert (taken / "x").read_text() == "mine" and not (run_dir / "export").exists()


_DEEPSPEED_STAGE0 = """
import os, socket, sys
import torch, deepspeed
from transformers import GPT2Config, GPT2LMHeadModel
with socket.socket() as s:
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port), RANK="0", WORLD_SIZE="1", LOCAL_RANK="0")
torch.manual_seed(0)
model = GPT2LMHeadModel(GPT2Config(n_layer=1, n_embd=32, n_head=2, n_positions=32, vocab_size=64))
model.config.save_pretrained(sys.argv[1] + "/model")
engine, _, _, _ = deepspeed.initialize(model=model, optimizer=torch.optim.AdamW(model.parameters(), lr=1e-2),
                                       config={"train_batch_size": 1, "zero_optimization": {"stage": 0}})
ids = torch.randint(0, 64, (1, 8))
engine.backward(engine(input_ids=ids, labels=ids).loss)
engine.step()
engine.save_checkpoint(sys.argv[1] + "/checkpoints/step-00000001", tag="deepspeed")
torch.save(model.state_dict(), sys.argv[1] + "/trained.pt")
"""


def test_a_deepspeed_stage_0_checkpoint_exports_whole(hpclaunch, hpc_home, tmp_path):
    """One device trains with ZeRO stage 0 (the recipes' choice there): DeepSpeed's zero_to_fp32 has no partitions
    to gather and failed on it with a traceback; the module in its model states file is the whole model."""
    import subprocess
    import sys

    import torch
    from transformers import AutoModelForCausalLM

    run_dir = tmp_path / "run"
    made = subprocess.run([sys.executable, "-c", _DEEPSPEED_STAGE0, str(run_dir)], capture_output=True, text=True,
                          timeout=300)
    assert made.returncode == 0, made.stderr[-3000:]
    assert not list((run_dir / "checkpoints" / "step-00000001" / "deepspeed").glob("*optim_states.pt"))
    result = hpclaunch("export", _record(run_dir), "--json")
    assert result.exit_code == 0, result.output
    loaded, info = AutoModelForCausalLM.from_pretrained(json.loads(result.stdout)["folder"], output_loading_info=True)
    assert not info["missing_keys"] and not info["unexpected_keys"]
    trained = torch.load(run_dir / "trained.pt")
    for name, tensor in loaded.state_dict().items():
        assert torch.equal(tensor, trained[name]), name  # the weights after the step, not the initial ones
