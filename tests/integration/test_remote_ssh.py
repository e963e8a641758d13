"""Submitting from a laptop over SSH (docs/remote.md) to the dev cluster's login (scripts/dev-sshd.sh: 127.0.0.1:2222,
key-only, its own host key).

The "laptop" is hpclaunch run with a PATH without Slurm's commands and in a mount namespace of its own where the
cluster's run root (/tmp/hpclaunch-ssh-runs) is an empty tmpfs: it can neither run sbatch/squeue/scancel nor read or
write a run directory but through the SSH connection. The host key is checked against a known_hosts file this test
writes from the sshd's public host key. GPT-2 tiny on 2 nodes is followed to COMPLETED, its logs read; a second job
is followed with `logs -f` and cancelled; a job whose rank raises is diagnosed (`logs --diagnose`); a cancelled one
is resumed from its checkpoint; one's offline W&B run is synced to a loopback W&B server; an unknown host key is
refused. No key material reaches a run directory, the registry or hpclaunch's output.

The jobs get `--set env.PYTHONPATH=<this checkout>` so that the compute nodes run this checkout's hpclaunch."""

from __future__ import annotations

import fcntl
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pytest

from tests.integration.backends import path_without_slurm

REPO = Path(__file__).resolve().parents[2]
SSHD = Path(os.environ.get("HPCLAUNCH_DEV_SSHD", "/var/lib/hpclaunch-dev-sshd"))
RUN_ROOT = Path("/tmp/hpclaunch-ssh-runs")  # dev-slurm-ssh's run_root, on the cluster side
SHORT = ("--set", "train.max_steps=8", "--set", "train.log_every=1", "--set", "train.save_every=0",
         "--set", "train.eval_steps=1", "--set", f"env.PYTHONPATH={REPO}")


def _sshd_up() -> bool:
    if shutil.which("sinfo") is None or subprocess.run(["sinfo"], capture_output=True).returncode != 0:
        return False
    # every xdist worker imports this module when it collects: one at a time runs the script (it rewrites sshd's
    # files and may restart it), the others then find it up
    with open(Path(tempfile.gettempdir()) / "hpclaunch-dev-sshd.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        up = subprocess.run([str(REPO / "scripts" / "dev-sshd.sh"), "up"], capture_output=True, text=True)
    return up.returncode == 0


pytestmark = [pytest.mark.slurm, pytest.mark.skipif(not _sshd_up(), reason="the dev cluster or its sshd is not up "
                                                    "(scripts/dev-cluster.sh up)")]


@pytest.fixture(scope="module")
def laptop(tmp_path_factory):
    """(HPCLAUNCH_HOME, a folder with the profile and known_hosts, the short runtime folder of the ssh sockets)."""
    home = tmp_path_factory.mktemp("laptop-home")
    conf = tmp_path_factory.mktemp("laptop-conf")
    runtime = Path(tempfile.mkdtemp(prefix="xdg-", dir="/tmp"))
    host_key = (SSHD / "host_ed25519_key.pub").read_text().split()
    (conf / "known_hosts").write_text(f"[127.0.0.1]:2222 {host_key[0]} {host_key[1]}\n")
    (conf / "empty_known_hosts").write_text("")
    text = (REPO / "cluster_profiles" / "dev-slurm-ssh.yaml").read_text()
    text = text.replace(f"known_hosts: {SSHD}/known_hosts", f"known_hosts: {conf}/known_hosts")
    assert f"{conf}/known_hosts" in text
    (conf / "dev-slurm-ssh.yaml").write_text(text)
    RUN_ROOT.mkdir(exist_ok=True)
    yield home, conf, runtime
    subprocess.run(["ssh", "-O", "exit", "-o", f"ControlPath={runtime}/hpclaunch-ssh/%C", "-p", "2222", "-l", "root",
                    "127.0.0.1"], capture_output=True)
    shutil.rmtree(runtime, ignore_errors=True)


@pytest.fixture(scope="module")
def no_slurm_path() -> str:
    return path_without_slurm()


def command(laptop, no_slurm_path, *args: str) -> list[str]:
    """hpclaunch as on a laptop: the cluster's run root hidden under an empty tmpfs."""
    return ["unshare", "-m", "--propagation", "private", "sh", "-c",
            f'mount -t tmpfs laptop {RUN_ROOT} && PATH={no_slurm_path} exec "$@"', "sh",
            sys.executable, "-m", "hpclaunch.cli.main", *args]


def env(laptop) -> dict[str, str]:
    home, conf, runtime = laptop
    return {**os.environ, "HPCLAUNCH_HOME": str(home), "PYTHONPATH": str(REPO), "XDG_RUNTIME_DIR": str(runtime)}


def run(laptop, no_slurm_path, *args: str, timeout: float = 900) -> subprocess.CompletedProcess:
    return subprocess.run(command(laptop, no_slurm_path, *args), capture_output=True, text=True, env=env(laptop),
                          timeout=timeout)


def ok(proc: subprocess.CompletedProcess) -> subprocess.CompletedProcess:
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    assert "PRIVATE KEY" not in proc.stdout + proc.stderr
    return proc


def submitted(proc: subprocess.CompletedProcess) -> tuple[str, Path]:
    ok(proc)
    job = re.search(r"^submitted job (\d+) ", proc.stdout, re.M)
    run_dir = re.search(r"run directory: (\S+)", proc.stdout)
    assert job and run_dir, proc.stdout + proc.stderr
    return job.group(1), Path(run_dir.group(1))


def no_key_material(*places: Path) -> None:
    secret = (SSHD / "client_ed25519").read_bytes()
    body = b"".join(secret.splitlines()[1:-1])[:40]  # a piece of the private key's base64
    for place in places:
        for f in [place] if place.is_file() else [p for p in place.rglob("*") if p.is_file()]:
            data = f.read_bytes()
            assert b"PRIVATE KEY" not in data and body not in data, f"key material in {f}"


@pytest.fixture(scope="module")
def gpt2(laptop, no_slurm_path) -> tuple[str, Path]:
    profile = str(laptop[1] / "dev-slurm-ssh.yaml")
    return submitted(run(laptop, no_slurm_path, "submit", "gpt2", "--profile", profile, "--preset", "tiny",
                         "--layout", "2n1g", *SHORT, "--follow"))


@pytest.mark.slow
def test_a_two_node_job_submitted_over_ssh_completes_and_its_logs_are_read(laptop, no_slurm_path, gpt2):
    job, run_dir = gpt2
    home = laptop[0]
    assert run_dir.parent == RUN_ROOT  # on the cluster side (this test sees it; the laptop side does not)
    out = (run_dir / "logs" / f"job.{job}.out").read_text()
    assert re.search(rf"hpclaunch: job {job} restart 0 on node\d,node\d, head node\d:", out), out[-2000:]
    assert (run_dir / "recipe" / "recipe.yaml").is_file()  # the recipe folder, copied over the connection
    status = json.loads(ok(run(laptop, no_slurm_path, "status", job, "--json")).stdout)
    assert status["state"] == "COMPLETED" and status["run_dir"] == str(run_dir)
    assert status["last_metrics"]["step"] == 8  # read from the cluster's run directory over SSH
    assert status["remote"]["host"] == "127.0.0.1" and status["remote"]["port"] == 2222
    assert job in ok(run(laptop, no_slurm_path, "jobs")).stdout
    watched = ok(run(laptop, no_slurm_path, "watch", job, "--once")).stdout
    assert job in watched and "COMPLETED" in watched and "8/8" in watched  # step/max from the copied metrics
    logs = ok(run(laptop, no_slurm_path, "logs", job, "-n", "3")).stdout
    assert "[rank0] " in logs and "[rank1] " in logs and "==> batch output <==" in logs
    losses = ok(run(laptop, no_slurm_path, "logs", job, "--rank", "0", "--grep", "loss", "-n", "2")).stdout
    assert len(losses.splitlines()) == 2 and all(ln.startswith("[rank0] ") and "loss" in ln
                                                 for ln in losses.splitlines())
    report = json.loads(ok(run(laptop, no_slurm_path, "report", job, "--json")).stdout)
    assert report["plots"] and report["timeline"]  # from the copy of the run directory, written on the laptop
    assert all(p.startswith(str(home / "remote")) for p in report["plots"])
    assert not list((home / "staging").iterdir())  # the local copy was removed after the copy
    no_key_material(run_dir, home, Path(str(home)))


@pytest.mark.slow
def test_commands_share_one_ssh_connection(laptop, no_slurm_path, gpt2):
    job, _ = gpt2
    log = SSHD / "sshd.log"
    before = log.read_text().count("Accepted publickey")
    for args in (("status", job), ("jobs",), ("logs", job, "-n", "1")):
        ok(run(laptop, no_slurm_path, *args))
    assert log.read_text().count("Accepted publickey") - before <= 1  # one login, reused by every command
    sockets = list((laptop[2] / "hpclaunch-ssh").iterdir())
    assert sockets and oct((laptop[2] / "hpclaunch-ssh").stat().st_mode & 0o777) == "0o700"


def submit_long(laptop, no_slurm_path, layout: str, *more: str) -> tuple[str, Path]:
    """GPT-2 tiny submitted over SSH to run until it is cancelled (100000 steps)."""
    return submitted(run(laptop, no_slurm_path, "submit", "gpt2", "--profile", str(laptop[1] / "dev-slurm-ssh.yaml"),
                         "--preset", "tiny", "--layout", layout, *SHORT, "--set", "train.max_steps=100000", *more))


@pytest.mark.slow
def test_logs_follow_streams_a_running_job_and_cancel_stops_it(laptop, no_slurm_path):
    # --remote over the profile's login (its identity and known_hosts kept)
    job, run_dir = submit_long(laptop, no_slurm_path, "2n1g", "--remote", "root@127.0.0.1:2222")
    follow = subprocess.Popen(command(laptop, no_slurm_path, "logs", job, "-f", "--rank", "0"), env=env(laptop),
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    assert follow.stdout is not None
    seen = []
    for line in follow.stdout:  # the rank's lines arrive while the job runs
        seen.append(line)
        if "loss" in line:
            break
    assert seen and all(ln.startswith("[rank0] ") for ln in seen), seen
    done = json.loads(ok(run(laptop, no_slurm_path, "cancel", job, "--json")).stdout)
    assert done["jobs"][0]["cancelled"] is True
    rest, err = follow.communicate(timeout=300)  # -f ends when the job has ended
    assert follow.returncode in (0, 1), err
    for _ in range(60):
        state = json.loads(ok(run(laptop, no_slurm_path, "status", job, "--json")).stdout)["state"]
        if state == "CANCELLED":
            break
        time.sleep(2)
    assert state == "CANCELLED"
    assert (run_dir / "logs").is_dir()


def test_an_unknown_host_key_is_refused_with_nothing_submitted(laptop, no_slurm_path, tmp_path):
    home, conf, _ = laptop
    text = (conf / "dev-slurm-ssh.yaml").read_text().replace(f"{conf}/known_hosts", f"{conf}/empty_known_hosts")
    profile = tmp_path / "dev-slurm-ssh.yaml"
    profile.write_text(text)
    runs = set(RUN_ROOT.iterdir())
    records = set((home / "registry").glob("*.json")) if (home / "registry").exists() else set()
    # a runtime folder of its own: a shared connection opened (and checked) before would be reused
    fresh = Path(tempfile.mkdtemp(prefix="xdg-", dir="/tmp"))
    proc = run((home, conf, fresh), no_slurm_path, "submit", "gpt2", "--profile", str(profile), "--preset", "tiny",
               *SHORT)
    assert proc.returncode == 2, proc.stdout + proc.stderr
    assert "cannot log in to root@127.0.0.1:2222" in proc.stderr and "host key" in proc.stderr
    assert "Traceback" not in proc.stderr
    assert set(RUN_ROOT.iterdir()) == runs
    assert (set((home / "registry").glob("*.json")) if (home / "registry").exists() else set()) == records
    shutil.rmtree(fresh)


def _staged(store: Path) -> Path:
    """A model staged in `store` as stage-assets leaves it: its files and a manifest with their sizes and times."""
    from hpclaunch.assets.store import FileEntry, Manifest, asset_path, sha256_file, write_manifest

    folder = asset_path(store, "model", "org/tiny-model", "main")
    (folder / "sub").mkdir(parents=True)
    (folder / "config.json").write_text('{"n_layer": 1}\n')
    (folder / "sub" / "model.safetensors").write_bytes(b"\0" * 4096)
    files = [FileEntry(p, (folder / p).stat().st_size, sha256_file(folder / p), (folder / p).stat().st_mtime_ns)
             for p in ("config.json", "sub/model.safetensors")]
    write_manifest(folder, Manifest("org/tiny-model", "model", "main", "abc", "https://hub", "now",
                                    parts=["config", "weights"], files=files))
    return folder


def test_the_staged_assets_are_checked_in_the_login_nodes_store(laptop, tmp_path, monkeypatch):
    from hpclaunch.core.remote import SshHost, Target
    from hpclaunch.errors import AssetError
    from hpclaunch.submission import remoteassets

    class Req:
        kind, repo_id, revision, parts, configs = "model", "org/tiny-model", "main", {"config", "weights"}, set()

    monkeypatch.setenv("HPCLAUNCH_HOME", str(laptop[0]))
    monkeypatch.setenv("XDG_RUNTIME_DIR", str(laptop[2]))
    import hpclaunch.assets.check

    # the job asks for this one model (the store's own request objects are made from a recipe's hub keys)
    monkeypatch.setattr(hpclaunch.assets.check, "requests_for_spec", lambda spec: [Req()])
    monkeypatch.setattr("hpclaunch.assets.requests.requests_for_spec", lambda spec: [Req()])
    folder = _staged(tmp_path / "store")
    from hpclaunch.api import resolve_spec
    from hpclaunch.config.base import replace
    from hpclaunch.submission.resolve import CliOverrides

    spec = resolve_spec("gpt2", str(laptop[1] / "dev-slurm-ssh.yaml"), CliOverrides(preset="tiny"))
    spec = replace(spec, profile=replace(spec.profile, assets=replace(spec.profile.assets,
                                                                        store=str(tmp_path / "store"))))
    host = SshHost(Target("127.0.0.1", "root", 2222, str(SSHD / "client_ed25519"), str(laptop[1] / "known_hosts")))
    remoteassets.check_assets(spec, host, "/root")  # sizes and times as the manifest says: staged
    (folder / "sub" / "model.safetensors").write_bytes(b"\0" * 10)
    with pytest.raises(AssetError, match=r"not ready in the store .*/store on root@127.0.0.1:2222:\n.*wrong size"):
        remoteassets.check_assets(spec, host, "/root")


def test_what_a_masked_lm_job_needs_of_its_assets_is_checked_in_the_login_nodes_store(laptop, tmp_path, monkeypatch):
    """bert_large over SSH, its assets imported on the login node as seed 002 downloads them: a tokenizer whose files
    name no mask token and a dataset without its train split are refused before queueing (issue 34.1), read there."""
    from hpclaunch.api import resolve_spec
    from hpclaunch.assets.importer import import_asset
    from hpclaunch.config.base import replace
    from hpclaunch.core.remote import SshHost, Target
    from hpclaunch.errors import AssetError
    from hpclaunch.submission import remoteassets
    from hpclaunch.submission.resolve import CliOverrides
    from tests.unit.test_assets_tokenizer import model_folder, seed_tokenizer, staged_by_hand

    monkeypatch.setenv("HPCLAUNCH_HOME", str(laptop[0]))
    monkeypatch.setenv("XDG_RUNTIME_DIR", str(laptop[2]))
    store = tmp_path / "store"  # the login node is this machine: its store is this folder
    spec = resolve_spec("bert_large", str(laptop[1] / "dev-slurm-ssh.yaml"),
                        CliOverrides(layout="1n2g", time="01:00:00"))
    spec = replace(spec, profile=replace(spec.profile, assets=replace(spec.profile.assets, store=str(store))))
    repo = "google-bert/bert-large-uncased"
    tokenizer = staged_by_hand(store, repo, seed_tokenizer(tmp_path / "tokenizer"))  # staged before it named them
    import_asset(model_folder(tmp_path / "model"), store, "model", repo)  # keeps the tokenizer's files as they are
    (tmp_path / "data").mkdir()
    (tmp_path / "data" / "test-00000-of-00001.parquet").write_bytes(b"PAR1")
    import_asset(tmp_path / "data", store, "dataset", "Salesforce/wikitext", config="wikitext-2-raw-v1")
    host = SshHost(Target("127.0.0.1", "root", 2222, str(SSHD / "client_ed25519"), str(laptop[1] / "known_hosts")))

    with pytest.raises(AssetError, match=r"no parquet files of split 'train'.*\(on root@127.0.0.1:2222\)"):
        remoteassets.check_assets(spec, host, "/root")
    (tmp_path / "data" / "train-00000-of-00001.parquet").write_bytes(b"PAR1")
    import_asset(tmp_path / "data", store, "dataset", "Salesforce/wikitext", config="wikitext-2-raw-v1")
    # config.json (model_type bert) is beside the tokenizer now: BertTokenizerFast's defaults name [MASK]
    remoteassets.check_assets(spec, host, "/root")
    (tokenizer / "config.json").write_text('{"model_type": "gpt2"}')  # not a class whose defaults have one
    import_asset(tokenizer, store, "model", repo)
    (tokenizer / "tokenizer_config.json").unlink()  # as staged before: no file names the tokens
    import hpclaunch.assets.store as layout

    manifest = layout.read_manifest(tokenizer)
    manifest.files = [f for f in manifest.files if f.path != "tokenizer_config.json"]
    layout.write_manifest(tokenizer, manifest)
    with pytest.raises(AssetError) as refused:
        remoteassets.check_assets(spec, host, "/root")
    assert str(refused.value).startswith(f"the job's tokenizer, model '{repo}' (revision main) in {tokenizer}, has no "
                                         "mask token, which task masked-lm needs")
    assert "(on root@127.0.0.1:2222)\n  hint: on root@127.0.0.1:2222: its tokenizer.json holds [MASK]" \
        in str(refused.value)


def test_a_job_whose_assets_the_login_node_lacks_is_refused(laptop, no_slurm_path, tmp_path):
    home, conf, _ = laptop
    runs = set(RUN_ROOT.iterdir())
    text = (conf / "dev-slurm-ssh.yaml").read_text().replace("store: ~/.hpclaunch/assets", f"store: {tmp_path}/none")
    (tmp_path / "dev-slurm-ssh.yaml").write_text(text)
    proc = run(laptop, no_slurm_path, "submit", "gpt2", "--profile", str(tmp_path / "dev-slurm-ssh.yaml"),
               "--layout", "1n1g", "--time", "00:10:00")
    assert proc.returncode == 2, proc.stdout + proc.stderr
    assert f"not ready in the store {tmp_path}/none on root@127.0.0.1:2222" in proc.stderr
    assert "model 'gpt2'" in proc.stderr and "is not staged" in proc.stderr and "Traceback" not in proc.stderr
    assert set(RUN_ROOT.iterdir()) == runs


from tests.fixtures.hubserver import fixtures as _hubfx  # noqa: E402

hub_root, hub, asset_env = _hubfx.hub_root, _hubfx.hub, _hubfx.asset_env  # the loopback hub's fixtures


def test_stage_assets_stages_here_and_sends_them_to_the_login_nodes_store(asset_env, hub, laptop, tmp_path,
                                                                         monkeypatch):
    import yaml

    from hpclaunch.assets.store import check_files, read_manifest

    monkeypatch.setenv("XDG_RUNTIME_DIR", str(laptop[2]))
    login_store = tmp_path / "login-store"
    name = asset_env.profile("hubssh", store=login_store, mirror=hub.url)
    path = asset_env.root / "cluster_profiles" / f"{name}.yaml"
    data = yaml.safe_load(path.read_text())
    data.update(scheduler="slurm", remote={"host": "127.0.0.1", "user": "root", "port": 2222,
                                            "identity": str(SSHD / "client_ed25519"),
                                            "known_hosts": str(laptop[1] / "known_hosts")})
    path.write_text(yaml.safe_dump(data))
    res = asset_env.run("stage-assets", "--model", "tiny-org/tiny-model", "--profile", name, "--json", "--timeout", "3")
    assert res.exit_code == 0, res.output
    assert json.loads(res.stdout)["host"] == "root@127.0.0.1:2222"
    folder = login_store / "models" / "tiny-org--tiny-model" / "main"
    manifest = read_manifest(folder)
    assert manifest is not None and manifest.repo_id == "tiny-org/tiny-model"
    # sizes and times to the nanosecond as the manifest records them: the check before a submit trusts them
    assert check_files(folder, manifest, hash_modified=False) == []
    sent = folder.stat().st_ino
    again = asset_env.run("stage-assets", "--model", "tiny-org/tiny-model", "--profile", name, "--json")
    assert again.exit_code == 0, again.output
    assert folder.stat().st_ino == sent  # the same asset is not sent again


FIXTURES = REPO / "tests" / "fixtures"


def run_with_fixtures(laptop, no_slurm_path, *args: str) -> subprocess.CompletedProcess:
    """`run`, with the test recipes (tests/fixtures/recipes: failmodes) on hpclaunch's recipe path."""
    return subprocess.run(command(laptop, no_slurm_path, *args), capture_output=True, text=True, timeout=900,
                          env={**env(laptop), "HPCLAUNCH_PATH": str(FIXTURES)})


@pytest.fixture(scope="module")
def failed(laptop, no_slurm_path) -> tuple[str, Path]:
    """A 2-rank job submitted over SSH whose rank 1 raises (failmodes --preset raise), followed to its end."""
    proc = run_with_fixtures(laptop, no_slurm_path, "submit", "failmodes", "--profile",
                             str(laptop[1] / "dev-slurm-ssh.yaml"), "--preset", "raise", "--set",
                             f"env.PYTHONPATH={REPO}", "--follow")
    job = re.search(r"^submitted job (\d+) ", proc.stdout, re.M)
    run_dir = re.search(r"run directory: (\S+)", proc.stdout)
    assert job and run_dir, proc.stdout + proc.stderr
    return job.group(1), Path(run_dir.group(1))


@pytest.mark.slow
def test_logs_diagnose_over_ssh_reads_the_ends_of_the_logs_on_the_login_node(laptop, no_slurm_path, failed):
    from hpclaunch.logs.diagnose import diagnose

    job, run_dir = failed
    d = json.loads(ok(run(laptop, no_slurm_path, "logs", job, "--diagnose", "--json")).stdout)
    assert (d["state"], d["cause"], d["rank"]) == ("FAILED", "python_error", 1), d
    assert "ValueError: bad batch shape on rank 1" in d["error"]
    assert d["file"] == str(run_dir / "logs" / "rank-1.restart-0.log")  # the login node's path
    assert d["first_failure"]["rank"] == "1"
    here = diagnose(run_dir, job, None)  # the same verdict as on the login node itself
    assert (here.cause, here.rank, here.error, here.file) == (d["cause"], d["rank"], d["error"], d["file"])
    text = ok(run(laptop, no_slurm_path, "logs", job, "--diagnose")).stdout
    assert f"job {job} FAILED" in text and "on rank 1" in text and "hint:" in text
    assert not list((laptop[0] / "remote").glob("*.diagnose"))  # the copy of the log ends is removed


def _until(what: str, check, timeout: float = 600):  # noqa: ANN001
    end = time.monotonic() + timeout
    while not (found := check()):
        assert time.monotonic() < end, f"not within {timeout:g} s: {what}"
        time.sleep(2)
    return found


@pytest.mark.slow
def test_resume_over_ssh_queues_the_job_again_on_the_login_node_from_its_checkpoint(laptop, no_slurm_path):
    job, run_dir = submit_long(laptop, no_slurm_path, "1n1g", "--set", "train.save_every=2")
    ckpts = run_dir / "checkpoints"
    _until("a checkpoint", lambda: ckpts.is_dir() and list(ckpts.glob("step-*")))
    ok(run(laptop, no_slurm_path, "cancel", job))
    _until("the job cancelled", lambda: json.loads(ok(run(laptop, no_slurm_path, "status", job, "--json")).stdout)
           ["state"] == "CANCELLED")
    done = json.loads(ok(run(laptop, no_slurm_path, "resume", job, "--json")).stdout)
    new = done["job_id"]
    try:
        step = done["resumes"]["step"]
        assert done["run_dir"] == str(run_dir) and done["resumes"]["job"] == job and step >= 2
        assert done["resumes"]["checkpoint"] == str(ckpts / f"step-{step:08d}")  # the login node's path
        log = run_dir / "logs" / f"rank-0.restart-{done['resumes']['restart']}.log"
        _until("the resumed job's log", lambda: log.is_file() and "resumed from" in log.read_text())
        assert f"at step {step}" in log.read_text()
        chain = [json.loads(ln) for ln in (run_dir / "retries.jsonl").read_text().splitlines()]
        assert {"from": job, "to": new, "resume": True}.items() <= chain[-1].items()
        stamps = [json.loads(ln) for ln in (run_dir / "timeline.jsonl").read_text().splitlines()]
        assert any(s["phase"] == "submitted" and s["job"] == new for s in stamps)
        status = json.loads(ok(run(laptop, no_slurm_path, "status", new, "--json")).stdout)
        assert status["resumes"]["job"] == job and status["remote"]["port"] == 2222
    finally:
        run(laptop, no_slurm_path, "cancel", new)


@pytest.mark.slow
def test_sync_over_ssh_uploads_the_offline_wandb_runs_from_here_and_marks_them_there(laptop, no_slurm_path):
    from tests.fixtures.wandbserver.server import WandbServer

    job, run_dir = submitted(run(laptop, no_slurm_path, "submit", "gpt2", "--profile",
                                 str(laptop[1] / "dev-slurm-ssh.yaml"), "--preset", "tiny", "--layout", "1n1g",
                                 *SHORT, "--set", "tracking.wandb.project=hl-ssh", "--follow"))
    (segment,) = (run_dir / "wandb").glob("offline-run-*")  # on the login node's side, written by the job
    with WandbServer() as wb:
        key = "k" * 40
        wandb_env = {**env(laptop), "WANDB_BASE_URL": wb.url, "WANDB_API_KEY": key}

        def sync() -> subprocess.CompletedProcess:
            return ok(subprocess.run(command(laptop, no_slurm_path, "sync", job), capture_output=True, text=True,
                                     env=wandb_env, timeout=600))

        first = sync()
        assert "uploaded 1 offline W&B run(s)" in first.stdout, first.stdout + first.stderr
        (name,) = wb.runs
        assert name.startswith("hl-ssh/") and wb.auth == {key}
        steps = sorted(h["_step"] for h in wb.runs[name].history if "train/loss" in h)
        assert steps == list(range(1, 9))  # the 8 steps the job logged, uploaded from here
        assert list(segment.glob("run-*.wandb.synced"))  # W&B's marker, written on the login node too
        again = sync()
        assert "nothing to upload" in again.stdout and len(wb.runs) == 1
