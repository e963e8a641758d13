"""Evaluation runs a compiled model eager (loop._eager): switching the model to eval mode would otherwise compile
it a second time (a minute for BERT-large on an H100) for a few batches."""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")
testing = pytest.importorskip("torch._dynamo.testing")

from hpclaunch.runtime.train.loop import _eager  # noqa: E402


@pytest.mark.skipif(not hasattr(torch.compiler, "set_stance"), reason="torch < 2.6 has no compile stance")
def test_evaluation_does_not_compile_the_model_again() -> None:
    torch._dynamo.reset()
    model = torch.nn.Sequential(torch.nn.Linear(8, 8), torch.nn.Dropout(0.1), torch.nn.Linear(8, 1))
    counter = testing.CompileCounter()
    compiled = torch.compile(model, backend=counter)
    x = torch.randn(4, 8)
    compiled(x).sum().backward()
    assert counter.frame_count == 1
    model.eval()
    with _eager(), torch.no_grad():
        eager = compiled(x)
    assert counter.frame_count == 1  # no second graph for eval mode
    assert torch.equal(eager, model(x))
    compiled(x)  # the control: outside the stance, eval mode is a new graph
    assert counter.frame_count == 2
