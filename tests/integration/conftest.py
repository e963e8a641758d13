"""Fixtures of the integration tests. ``backend``: each backend that reaches the dev cluster in turn (dev-slurm
through Slurm's commands, dev-slurm-rest through slurmrestd); see tests/integration/backends.py."""

from __future__ import annotations

import pytest

from tests.integration.backends import Backend, make_backend


@pytest.fixture(params=["dev-slurm", "dev-slurm-rest"])
def backend(request: pytest.FixtureRequest) -> Backend:
    return make_backend(request.param)
