"""What a job asks of each node (issue 22, 3.1): a job on part of a node asks its devices' share of the node's
CPUs and memory (floor, at least 1), a whole-node job the whole node (and --exclusive where the partition says so);
`--set resources.cpus_per_task` / `resources.mem_per_device` ask otherwise, checked against the node, never clipped;
OMP_NUM_THREADS follows the CPUs asked per rank; the dry run says what it asks."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml
from click.testing import Result

from tests.unit.test_after_sbatch import _no_run_dirs

REPO = Path(__file__).resolve().parents[2]


def sbatch_lines(script: str) -> list[str]:
    return [line for line in script.splitlines() if line.startswith("#SBATCH")]


def _step(script: str) -> str:
    """The launch step's options (the node health step's, before it, ask the same; the clean-up of node memory
    after a failed launch, after it, asks one CPU and lets a node's failure pass)."""
    return [ln.strip() for ln in script.splitlines()
            if ln.strip().startswith("--cpus-per-task=") and "--kill-on-bad-exit=0" not in ln][-1]


def refused(result: Result, hpc_home: Path, *words: str) -> None:
    """Exit 2 with a message that holds `words`, no traceback, and no run directory left."""
    assert result.exit_code == 2, result.output
    assert result.stderr.startswith("hpclaunch: error: ") and "Traceback" not in result.output
    for word in words:
        assert word in result.stderr, result.stderr
    assert _no_run_dirs(hpc_home)


def _a800(tmp_path: Path, **partition: object) -> Path:
    """The guangzhou-a800 profile with its partition's keys changed (None: the key removed)."""
    data = yaml.safe_load((REPO / "cluster_profiles" / "guangzhou-a800.yaml").read_text())
    for key, value in partition.items():
        if value is None:
            data["partitions"]["gpu"].pop(key)
        else:
            data["partitions"]["gpu"][key] = value
    path = tmp_path / "a800.yaml"
    path.write_text(yaml.safe_dump(data))
    return path


def test_one_gpu_of_eight_asks_an_eighth_of_the_node(hpclaunch):
    """The report's command: before, --cpus-per-task=56 and no memory (the other seven GPUs blocked)."""
    r = hpclaunch("submit", str(REPO / "recipes" / "gpt2"), "--profile", "guangzhou-a800", "--layout", "1n1g",
                  "--dry-run")
    assert r.exit_code == 0, r.output
    lines = sbatch_lines(r.stdout)
    assert {"#SBATCH --cpus-per-task=7", "#SBATCH --gres=gpu:1", "#SBATCH --mem=128G"} <= set(lines), lines
    assert "#SBATCH --exclusive" not in lines
    assert _step(r.stdout) == "--cpus-per-task=7 --gres=gpu:1 \\"
    assert "export OMP_NUM_THREADS=7" in r.stdout.splitlines()
    assert ("hpclaunch: per node: 1 of 8 devices, 7 of 56 CPUs (OMP_NUM_THREADS=7), 128G of 1024G memory; "
            "shares the node") in r.stderr


@pytest.mark.parametrize("layout, cpus, mem, threads", [
    ("1n2g", 14, "256G", 7), ("1n3g", 21, "384G", 7), ("2n4g", 28, "512G", 7), ("1n8g", 56, "0", 7),
])
def test_the_share_follows_the_devices(hpclaunch, layout, cpus, mem, threads):
    r = hpclaunch("submit", "allreduce", "--profile", "guangzhou-a800", "--layout", layout, "--dry-run")
    assert r.exit_code == 0, r.output
    assert {f"#SBATCH --cpus-per-task={cpus}", f"#SBATCH --mem={mem}"} <= set(sbatch_lines(r.stdout))
    assert f"export OMP_NUM_THREADS={threads}" in r.stdout.splitlines()


def test_the_share_is_at_least_one_cpu(hpclaunch):
    """dev-slurm: 1 CPU and 4 GiB for 4 devices; one device asks 1 CPU (not 0) and 1G."""
    r = hpclaunch("submit", "allreduce", "--profile", "dev-slurm", "--layout", "1n1g", "--dry-run")
    assert r.exit_code == 0, r.output
    assert {"#SBATCH --cpus-per-task=1", "#SBATCH --mem=1G", "#SBATCH --gres=gpu:1"} <= set(sbatch_lines(r.stdout))
    assert "export OMP_NUM_THREADS=1" in r.stdout.splitlines()


def test_a_whole_node_job_asks_the_whole_node_and_exclusive_where_the_partition_says_so(hpclaunch, tmp_path):
    profile = str(_a800(tmp_path, exclusive=True))
    whole = hpclaunch("submit", "allreduce", "--profile", profile, "--layout", "2n8g", "--dry-run")
    assert whole.exit_code == 0, whole.output
    assert {"#SBATCH --cpus-per-task=56", "#SBATCH --mem=0", "#SBATCH --exclusive"} <= set(sbatch_lines(whole.stdout))
    assert "all of its memory (1024G); the whole node, exclusive" in whole.stderr
    part = hpclaunch("submit", "allreduce", "--profile", profile, "--layout", "2n4g", "--dry-run")
    assert part.exit_code == 0, part.output
    assert "#SBATCH --exclusive" not in sbatch_lines(part.stdout)
    default = hpclaunch("submit", "allreduce", "--profile", "guangzhou-a800", "--layout", "1n8g", "--dry-run")
    assert "#SBATCH --exclusive" not in sbatch_lines(default.stdout)  # exclusive: false by default


def test_a_partition_without_memory_gb_asks_no_memory(hpclaunch, tmp_path):
    r = hpclaunch("submit", "allreduce", "--profile", str(_a800(tmp_path, memory_gb=None)), "--layout", "1n1g",
                  "--dry-run")
    assert r.exit_code == 0, r.output
    assert not any(line.startswith("#SBATCH --mem") for line in sbatch_lines(r.stdout))
    assert "memory: the scheduler's default" in r.stderr


def test_set_resources_asks_otherwise_and_the_threads_follow(hpclaunch, hpc_home):
    r = hpclaunch("submit", "allreduce", "--profile", "guangzhou-a800", "--layout", "1n2g", "--dry-run",
                  "--set", "resources.cpus_per_task=5", "--set", "resources.mem_per_device=64g")
    assert r.exit_code == 0, r.output
    assert {"#SBATCH --cpus-per-task=5", "#SBATCH --mem=128G"} <= set(sbatch_lines(r.stdout))
    assert _step(r.stdout).startswith("--cpus-per-task=5 ")
    assert "export OMP_NUM_THREADS=2" in r.stdout.splitlines()  # 5 CPUs for 2 ranks
    resolved = yaml.safe_load(next((hpc_home / "runs").glob("*/resolved.yaml")).read_text())
    assert resolved["recipe"]["resources"] == {"cpus_per_task": 5, "mem_per_device": "64G"}
    assert resolved["resources"] == {"cpus_per_task": 5, "cpus_per_rank": 2, "mem_mb": 131072, "exclusive": False}
    # a whole node with memory per device asks that, not all of the node's; a bare number is MiB, as in Slurm
    whole = hpclaunch("submit", "allreduce", "--profile", "guangzhou-a800", "--layout", "1n8g", "--dry-run",
                      "--set", "resources.mem_per_device=1500")
    assert "#SBATCH --mem=12000M" in sbatch_lines(whole.stdout)


def test_the_recipe_env_sets_the_threads_over_the_share_and_a_profile_env_does_not(hpclaunch, tmp_path):
    data = yaml.safe_load((REPO / "cluster_profiles" / "guangzhou-a800.yaml").read_text())
    data["env"]["OMP_NUM_THREADS"] = "56"
    profile = tmp_path / "fixed-omp.yaml"
    profile.write_text(yaml.safe_dump(data))
    share = hpclaunch("submit", "allreduce", "--profile", str(profile), "--layout", "1n1g", "--dry-run")
    assert "export OMP_NUM_THREADS=7" in share.stdout.splitlines()
    mine = hpclaunch("submit", "allreduce", "--profile", str(profile), "--layout", "1n1g", "--dry-run",
                     "--set", 'env.OMP_NUM_THREADS="3"')
    assert "export OMP_NUM_THREADS=3" in mine.stdout.splitlines() and "(OMP_NUM_THREADS=3)" in mine.stderr


@pytest.mark.parametrize("sets, words", [
    (("resources.cpus_per_task=57",),
     ["resources.cpus_per_task: 57 CPUs (--set resources.cpus_per_task=57) is more than the 56 a node of "
      "partition 'gpu' of profile 'guangzhou-a800' has", "ask for at most 56, or leave it out: 2 of 8 devices ask 14"]),
    (("resources.mem_per_device=600G",),
     ["resources.mem_per_device: 600G x 2 devices = 1200G per node (--set resources.mem_per_device=600G) is more "
      "than the 1024G a node of partition 'gpu' of profile 'guangzhou-a800' has (memory_gb: 1024)",
      "ask for at most 512G per device, or leave it out: the job asks 256G"]),
    (("resources.mem_per_device=64GB",), ["resources.mem_per_device: not a memory size such as 64G"]),
    (("resources.mem_per_device=0",), ["resources.mem_per_device: not a memory size"]),
    (("resources.cpus_per_task=0",), ["resources.cpus_per_task"]),
    (("resources.gpus=1",), ["resources.gpus: unknown key", "cpus_per_task, mem_per_device"]),
])
def test_more_than_a_node_has_is_refused_naming_the_key_the_value_and_the_limit(hpclaunch, hpc_home, sets, words):
    args = [w for s in sets for w in ("--set", s)]
    r = hpclaunch("submit", "allreduce", "--profile", "guangzhou-a800", "--layout", "1n2g", "--dry-run", *args)
    refused(r, hpc_home, *words)


def test_cpus_and_memory_are_set_through_resources_notsbatch_lines(hpclaunch, hpc_home):
    for flag in ("cpus-per-task=4", "cpus-per-gpu=4"):
        r = hpclaunch("submit", "allreduce", "--profile", "guangzhou-a800", "--sbatch", flag, "--dry-run")
        refused(r, hpc_home, "use --set resources.cpus_per_task=N")
    both = hpclaunch("submit", "allreduce", "--profile", "guangzhou-a800", "--sbatch", "mem=1G", "--dry-run",
                     "--set", "resources.mem_per_device=1G")
    refused(both, hpc_home, "--sbatch mem and resources.mem_per_device both ask the job's memory")
    # a memory option of sbatch's own replaces the --mem hpclaunch writes (sbatch takes one of them)
    for flag, line in (("mem=0", "#SBATCH --mem=0"), ("mem-per-cpu=4G", "#SBATCH --mem-per-cpu=4G")):
        r = hpclaunch("submit", "allreduce", "--profile", "guangzhou-a800", "--layout", "1n1g", "--sbatch", flag,
                      "--dry-run")
        assert r.exit_code == 0, r.output
        assert [x for x in sbatch_lines(r.stdout) if x.startswith("#SBATCH --mem")] == [line]
