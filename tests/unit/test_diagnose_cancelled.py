"""A job the user cancelled is diagnosed as cancelled by the user, not as the failure its ranks print while
they are stopped, with the newest checkpoint and the `hpclaunch resume` that goes on from it (real local jobs,
`hpclaunch cancel`)."""

from __future__ import annotations

import json

from tests.fixtures.jobrecords import start_local_job, wait_local

_TRAIN = """mkdir -p logs checkpoints/step-00000100 checkpoints/step-00000200 checkpoints/.tmp-step-00000300
echo "step 200 loss 1.5" > logs/rank-0.restart-0.log
trap 'echo "[rank0]: torch.distributed.elastic.multiprocessing.api.SignalException: Process 1 got signal: 15" \
  >> logs/rank-0.restart-0.log; exit 143' TERM
sleep 60 & wait
"""


def test_a_cancelled_job_is_diagnosed_as_cancelled_with_its_newest_checkpoint(hpclaunch):
    job_id, run_dir = start_local_job(hpclaunch, _TRAIN)
    assert wait_local(job_id, until="RUNNING") == "RUNNING"
    assert hpclaunch("cancel", job_id).exit_code == 0
    assert wait_local(job_id) == "CANCELLED"
    result = hpclaunch("logs", job_id, "--diagnose")
    assert result.exit_code == 0, result.output
    assert f"job {job_id} CANCELLED" in result.stdout
    assert "cause: cancelled by a user" in result.stdout
    assert f"its newest checkpoint is step 200 ({run_dir / 'checkpoints' / 'step-00000200'})" in result.stdout
    assert f"to go on from it: hpclaunch resume {job_id}" in result.stdout
    data = json.loads(hpclaunch("logs", job_id, "--diagnose", "--json").stdout)
    assert data["cause"] == "cancelled" and data["checkpoint"] == str(run_dir / "checkpoints" / "step-00000200")


def test_a_cancelled_job_without_a_checkpoint_is_to_be_started_over(hpclaunch):
    job_id, run_dir = start_local_job(hpclaunch, "sleep 60")
    assert wait_local(job_id, until="RUNNING") == "RUNNING"
    hpclaunch("cancel", job_id)
    out = hpclaunch("logs", job_id, "--diagnose").stdout
    assert "cause: cancelled by a user" in out
    assert f"it wrote no checkpoint, so start it over (a new run directory): hpclaunch resume {job_id} --from-scratch" \
        in out
