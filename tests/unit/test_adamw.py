"""hpclaunch's FusedAdamW (hpclaunch/runtime/train/adamw.py) is torch's fused AdamW: the same parameters bit for bit
step after step, the same state dict (checkpoints of either load into the other), GradScaler's skipped steps, and
a whole training step of the lean GPT-2 engine that imports no torch._dynamo."""

from __future__ import annotations

import subprocess
import sys

import pytest

torch = pytest.importorskip("torch")

from hpclaunch.runtime.train.adamw import FusedAdamW  # noqa: E402

HYPER = {"lr": 3e-3, "betas": (0.9, 0.95), "eps": 1e-8}


def _model(seed: int = 0) -> torch.nn.Module:
    torch.manual_seed(seed)
    return torch.nn.Sequential(torch.nn.Linear(12, 16), torch.nn.GELU(), torch.nn.LayerNorm(16),
                               torch.nn.Linear(16, 5))


def _groups(model: torch.nn.Module) -> list[dict]:
    """Weight decay on matrices only, as make_optimizer groups them."""
    params = list(model.parameters())
    return [{"params": [p for p in params if p.dim() >= 2], "weight_decay": 0.1},
            {"params": [p for p in params if p.dim() < 2], "weight_decay": 0.0}]


def _train(model: torch.nn.Module, optimizer: torch.optim.Optimizer, steps: range) -> None:
    for step in steps:
        g = torch.Generator().manual_seed(step)
        x, y = torch.randn(8, 12, generator=g), torch.randn(8, 5, generator=g)
        optimizer.zero_grad(set_to_none=False)
        torch.nn.functional.mse_loss(model(x), y).backward()
        optimizer.step()


def _params(model: torch.nn.Module) -> list[torch.Tensor]:
    return [p.detach().clone() for p in model.parameters()]


def test_it_steps_as_torchs_fused_adamw_bit_for_bit():
    ours, theirs = _model(), _model()
    _train(ours, FusedAdamW(_groups(ours), **HYPER), range(5))
    _train(theirs, torch.optim.AdamW(_groups(theirs), fused=True, **HYPER), range(5))
    for a, b in zip(_params(ours), _params(theirs), strict=True):
        assert torch.equal(a, b)
    assert not all(torch.equal(a, b) for a, b in zip(_params(ours), _params(_model()), strict=True))  # it trained


@pytest.mark.parametrize("saved_by", ["torch", "torch-fused", "ours"])
def test_a_checkpoint_of_either_resumes_in_the_other_to_the_same_weights(saved_by):
    """A run checkpointed after 3 steps and resumed for 3 more ends where 6 uninterrupted steps end; the state dict
    has torch's layout (an old checkpoint made with torch's AdamW resumes in FusedAdamW, and back)."""
    make = {"torch": lambda g: torch.optim.AdamW(g, **HYPER),
            "torch-fused": lambda g: torch.optim.AdamW(g, fused=True, **HYPER),
            "ours": lambda g: FusedAdamW(g, **HYPER)}
    first = _model()
    opt = make[saved_by](_groups(first))
    _train(first, opt, range(3))
    saved = opt.state_dict()
    assert set(saved["state"][0]) == {"step", "exp_avg", "exp_avg_sq"} and float(saved["state"][0]["step"]) == 3

    resumed = _model(seed=9)
    resumed.load_state_dict(first.state_dict())
    resumer = "torch-fused" if saved_by == "ours" else "ours"
    opt = make[resumer](_groups(resumed))
    opt.load_state_dict(saved)
    _train(resumed, opt, range(3, 6))

    straight = _model()
    _train(straight, make[resumer](_groups(straight)), range(6))
    if saved_by == "torch":  # the first three steps ran in torch's for-loop kernel: equal to rounding
        assert all(torch.allclose(a, b, atol=1e-6) for a, b in zip(_params(resumed), _params(straight), strict=True))
    else:
        assert all(torch.equal(a, b) for a, b in zip(_params(resumed), _params(straight), strict=True))


def test_a_step_gradscaler_skips_changes_nothing_and_is_not_counted():
    model = _model()
    opt = FusedAdamW(_groups(model), **HYPER)
    scaler = torch.amp.GradScaler("cpu", init_scale=2.0**8)
    _train(model, opt, range(2))
    before, steps = _params(model), [float(s["step"]) for s in opt.state.values()]
    opt.zero_grad(set_to_none=False)
    scaler.scale(model(torch.full((2, 12), float("inf"))).sum()).backward()
    scaler.step(opt)
    scaler.update()
    assert all(torch.equal(a, b) for a, b in zip(before, _params(model), strict=True))
    assert [float(s["step"]) for s in opt.state.values()] == steps
    assert scaler.get_scale() == 2.0**7  # the scaler saw the inf and backed off


def test_options_it_does_not_step_are_refused():
    with pytest.raises(ValueError, match="amsgrad"):
        FusedAdamW(_model().parameters(), amsgrad=True, **HYPER)


def test_a_lean_engine_step_imports_no_compiler():
    """The torch engine's whole step (forward, backward, clip, FusedAdamW, LambdaLR, zero_grad, state dict) and an
    evaluation forward in a fresh process: torch's own AdamW would import torch._dynamo (and sympy) on its first
    call, and so would evaluation's torch.compiler.set_stance."""
    code = """
import sys, torch
from hpclaunch.config.recipe import TrainSpec
from hpclaunch.runtime.train.distributed import Dist
from hpclaunch.runtime.train.engine import TorchEngine

class Tiny(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.linear = torch.nn.Linear(4, 4)
    def forward(self, x, labels):
        return type("Out", (), {"loss": torch.nn.functional.mse_loss(self.linear(x), labels)})()

cpu = Dist(rank=0, world_size=1, local_rank=0, accelerator="cpu", backend="gloo", device=torch.device("cpu"))
engine = TorchEngine(Tiny(), TrainSpec(max_steps=4, warmup_steps=1), cpu, "fp32", grad_accum=1)
for _ in range(2):
    engine.zero_grad()
    engine.micro_step({"x": torch.randn(2, 4), "labels": torch.randn(2, 4)}, last=True)
    engine.step()
engine.optimizer.load_state_dict(engine.optimizer.state_dict())
from hpclaunch.runtime.train import loop
with loop._eager():  # evaluation's "run compiled models eager", with nothing compiled
    engine.forward_loss({"x": torch.randn(2, 4), "labels": torch.randn(2, 4)})
print(type(engine.optimizer).__name__, sorted(m for m in ("torch._dynamo", "sympy") if m in sys.modules))
"""
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr[-3000:]
    assert out.stdout.split() == ["FusedAdamW", "[]"], out.stdout + out.stderr[-2000:]
