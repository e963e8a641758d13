"""The slurm-rest scheduler without a cluster: the job script (the Slurm one, less `--signal=B:`, plus its own
USR1), the #SBATCH lines read back as sbatch reads them and turned into slurmrestd's job description, the
token's sources and secrecy, and slurmrestd's recorded answers (tests/fixtures/slurmrestd/, README.md there: Slurm
22.05 in OpenAPI v0.0.38, and 26.05 in v0.0.45 in its v0.0.45/) replayed by a server on 127.0.0.1, each with its own
`GET /openapi/v3` (the version spoken is negotiated first): statuses with reasons in words, usage equal to sacct's,
errors in words. The negotiation itself and the typed job description of v0.0.40 on: test_slurm_rest_versions.py."""

from __future__ import annotations

import base64
import json
import re
import subprocess
import threading
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

from hpclaunch.core.shell import quote
from hpclaunch.errors import CommandError, ConfigError
from hpclaunch.schedulers import get_scheduler
from hpclaunch.schedulers.slurm import accounting
from hpclaunch.schedulers.slurm_rest import answers, jobdesc, versions
from hpclaunch.schedulers.slurm_rest.connection import Connection, RestError, claims, errors, user
from hpclaunch.schedulers.slurm_rest.scheduler import SlurmRestScheduler
from hpclaunch.submission.render import render
from hpclaunch.submission.resolve import CliOverrides, resolve
from hpclaunch.submission.rundir import with_recipe_copy

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "slurmrestd"
# each recorded release: its answers' folder and its `GET /openapi/v3` (paths only: openapi/)
RELEASES = {"22.05": (FIXTURES, "slurmrestd-22.05-dev"), "26.05": (FIXTURES / "v0.0.45", "slurmrestd-26.05")}
RUN_DIR = Path("/runs/golden")


def fake_token(user_name: str = "root", expires: float | None = None) -> str:
    def part(data: dict) -> str:
        return base64.urlsafe_b64encode(json.dumps(data).encode()).decode().rstrip("=")

    exp = int(time.time() + 3600 if expires is None else expires)
    body = {"exp": exp, "iat": exp - 60, "sun": user_name}
    return f"{part({'alg': 'HS256', 'typ': 'JWT'})}.{part(body)}.c2lnbmF0dXJl"


def recorded(name: str, release: str = "22.05") -> dict:
    return json.loads((RELEASES[release][0] / f"{name}.json").read_text())


def openapi(release: str) -> dict:
    return json.loads((FIXTURES / "openapi" / f"{RELEASES[release][1]}.json").read_text())


# --- the job script and its #SBATCH lines ---------------------------------------------------------------------


def _script(profile: str, *sets: str, layout: str = "2n1g", sbatch: tuple[str, ...] = ()) -> str:
    spec = resolve("gpt2", profile, CliOverrides(preset="tiny", layout=layout, sets=sets, sbatch=sbatch))
    return render(with_recipe_copy(spec, RUN_DIR), RUN_DIR).script


def test_the_job_script_is_the_slurm_one_less_the_batch_signal_plus_its_own_usr1(hpc_home):
    slurm, rest = _script("dev-slurm").splitlines(), _script("dev-slurm-rest").splitlines()
    gone = [line for line in slurm if line not in rest]
    added = [line for line in rest if line not in slurm]
    scheduler = "export HPCLAUNCH_SCHEDULER={}  # whose nodes a failure may blame (state/suspects.py)"
    assert gone == [slurm[1], "#SBATCH --signal=B:USR1@120", scheduler.format("slurm"),
                    "HPCLAUNCH_STATE=/runs/golden/slurm"]
    assert scheduler.format("slurm-rest") in rest
    assert added[0] == slurm[1].replace("dev-slurm,", "dev-slurm-rest,").replace("scheduler slurm.",
                                                                               "scheduler slurm-rest.")
    assert "HPCLAUNCH_STATE=/runs/golden/slurm-rest" in added
    # 20 minutes less the 120 s sbatch's --signal=B:USR1@120 would have warned before
    assert "  sleep 1080 & s=$!; wait \"$s\"" in added
    assert "export SLURMRESTD_URL=http://127.0.0.1:6820" in added and "export SLURM_JWT_FILE='~/.slurm-jwt'" in added
    assert len(added) == 14, added


def test_a_short_job_arms_no_usr1_as_it_asks_for_no_signal(hpc_home):
    script = _script("dev-slurm-rest", "time=00:10:00")
    assert "#SBATCH --signal" not in script and "kill -USR1 $$" not in script


def _job_part(script: str, run_dir: Path, seconds: float) -> str:
    """The job variables part of `script`, its timer at `seconds`, in `run_dir`."""
    job = script.split("# --- the job (Slurm)")[1].split("# --- start-up timeline")[0]
    assert "sleep 840 & s=$!" in job
    return job.replace("sleep 840", f"sleep {seconds}").replace("/runs/golden", str(run_dir))


def test_the_usr1_reaches_the_batch_shell_and_requeues(hpc_home, tmp_path):
    """The armed USR1 runs the Slurm part's requeue_job: the launch is signalled, then `scontrol requeue`."""
    script = _script("dev-slurm-rest", "time=00:16:00")
    job = _job_part(script, tmp_path, 0.5)
    signals = script.split("requeue_job() {")[1].split("[ -z")[0]
    fake = tmp_path / "bin"
    fake.mkdir()
    (fake / "scontrol").write_text('#!/bin/sh\necho "scontrol $*"\n')
    (fake / "scontrol").chmod(0o755)
    body = (f"export PATH={fake}:$PATH SLURM_JOB_ID=7 SLURM_JOB_NODELIST=node1\nhpclaunch_stamp() {{ :; }}\n{job}\n"
            f"sleep 30 &\nLAUNCH_PID=$!\nrequeue_job() {{{signals}\nwhile true; do wait; done\n")
    proc = subprocess.run(["bash", "-c", body], capture_output=True, text=True, timeout=20)
    assert "hpclaunch: USR1: checkpointing, then requeueing job 7" in proc.stdout
    assert "scontrol requeue 7" in proc.stdout and proc.returncode == 0, proc.stdout + proc.stderr


def test_the_timer_ends_with_the_shell(hpc_home, tmp_path):
    """A job that ends before its warning leaves no timer behind (no cgroup may be there to reap it)."""
    job = _job_part(_script("dev-slurm-rest", "time=00:16:00"), tmp_path, 300)
    body = (f"export SLURM_JOB_ID=7 SLURM_JOB_NODELIST=node1\nscontrol() {{ echo node1; }}\n{job}\n"
            "echo $hpclaunch_usr1_timer")
    proc = subprocess.run(["bash", "-c", body], capture_output=True, text=True, timeout=20)
    timer = proc.stdout.split()[-1]

    def running(pid: str) -> bool:  # gone, or a zombie nobody reaped yet
        try:
            return Path(f"/proc/{pid}/stat").read_text().split()[2] != "Z"
        except OSError:
            return False

    time.sleep(0.5)
    assert not running(timer), "the timer outlived its shell"
    left = subprocess.run(["pgrep", "-f", "^sleep 300$"], capture_output=True, text=True).stdout.split()
    assert not [p for p in left if running(p) and Path(f"/proc/{p}/stat").read_text().split()[3] == timer]


def test_the_sbatch_lines_become_the_job_description(hpc_home):
    script = _script("dev-slurm-rest")
    job = jobdesc.describe(["--get-user-env", *jobdesc.script_options(script), "--dependency=afterok:5"],
                           {"PATH": "/usr/bin:/bin"}, "/runs/golden", {})
    assert job == {
        "get_user_environment": "", "cpus_per_task": "1", "gres": "gpu:1", "name": "gpt2", "nodes": "2",
        "tasks_per_node": "1", "memory_per_node": "1G", "open_mode": "append",
        "standard_output": "/runs/golden/logs/job.%j.out",
        "partition": "debug", "requeue": True, "time_limit": "00:20:00", "dependency": "afterok:5",
        "environment": {"PATH": "/usr/bin:/bin"}, "current_working_directory": "/runs/golden"}


def test_a_sweep_array_script_carries_the_array(hpc_home, tmp_path):
    from hpclaunch.submission import sweep

    elements = sweep.resolve_elements("gpt2", "dev-slurm-rest", CliOverrides(preset="tiny", layout="1n1g"),
                                      sweep.parse_axes(["train.lr=1e-3,2e-3"]))
    done = sweep.dry_run(elements, 1)
    job = jobdesc.describe(jobdesc.script_options(done.script), {}, str(done.sweep_dir), {})
    assert job["array"] == "0-1%1" and job["standard_output"].endswith("/logs/job.%A_%a.out")
    assert "signal" not in job and "kill -USR1 $$" not in done.script  # each element's own script arms it


@pytest.mark.parametrize("value", ["plain", "two words", "it's", 'say "hi"', "back\\slash", "a#b", "$HOME", "x=y,z"])
def test_sbatch_lines_are_read_back_as_sbatch_reads_them(value):
    # the Slurm scheduler's quoting of an #SBATCH value (scheduler.sbatch_options)
    line = f" --comment={quote(value).replace(chr(92), chr(92) * 2)} # trailing comment"
    assert jobdesc.sbatch_words(line) == [f"--comment={value}"]


def test_only_the_lines_before_the_first_command_count():
    script = "#!/bin/bash\n# a comment\n#SBATCH --nodes=2 --job-name=a\n\n#SBATCH --time=5\necho hi\n#SBATCH --qos=x\n"
    assert jobdesc.script_options(script) == ["--nodes=2", "--job-name=a", "--time=5"]


def test_export_names_what_the_job_gets_from_here_and_never_the_token():
    here = {"PYTHONPATH": "/src", "HOME": "/home/me", "SLURM_JWT": "secret"}
    assert jobdesc.exported("PYTHONPATH,MISSING,A=1", here) == {"PYTHONPATH": "/src", "A": "1"}
    assert jobdesc.exported("ALL", here) == {"PYTHONPATH": "/src", "HOME": "/home/me"}
    assert jobdesc.exported("NONE", here) == {}
    job = jobdesc.describe(["--export=ALL,B=2"], {"PATH": "/bin"}, "/x", here)
    assert job["environment"] == {"PATH": "/bin", "PYTHONPATH": "/src", "HOME": "/home/me", "B": "2"}


def test_an_option_slurmrestd_has_no_field_for_is_refused_before_anything_is_written(hpclaunch):
    res = hpclaunch("submit", "allreduce", "--profile", "dev-slurm-rest", "--sbatch", "propagate=ALL", "--dry-run")
    assert res.exit_code == 2
    assert "--propagate has no field in slurmrestd's job description (OpenAPI v0.0.38, v0.0.40-v0.0.45)" in res.stderr
    # one that some versions have (v0.0.40 on): refused once the version spoken is known, at submit
    assert hpclaunch("submit", "allreduce", "--profile", "dev-slurm-rest", "--sbatch", "overcommit",
                     "--dry-run").exit_code == 0
    with pytest.raises(ConfigError, match=r"--overcommit has no field .* \(OpenAPI v0\.0\.38\)"):
        jobdesc.describe(["--overcommit"], {}, "/x", {})
    with pytest.raises(ConfigError, match="batch shell alone"):
        jobdesc.describe(["--signal=B:USR1@120"], {}, "/x", {})


def test_a_token_in_the_profile_env_is_refused_without_showing_it(hpclaunch, tmp_path):
    profile = (Path(__file__).resolve().parents[2] / "cluster_profiles" / "dev-slurm-rest.yaml").read_text()
    path = tmp_path / "leaky.yaml"
    path.write_text(profile.replace("  OMP_NUM_THREADS:", "  SLURM_JWT: eyJsecret.value.x\n  OMP_NUM_THREADS:"))
    res = hpclaunch("submit", "allreduce", "--profile", str(path), "--dry-run")
    assert res.exit_code == 2 and "env.SLURM_JWT: SLURM_JWT must not be set here" in res.stderr
    assert "eyJsecret" not in res.output


# --- the token ------------------------------------------------------------------------------------------------


def test_the_token_comes_from_the_environment_then_the_file(monkeypatch, tmp_path):
    token = fake_token("alice")
    file = tmp_path / "jwt"
    file.write_text(f"SLURM_JWT={token}\n")
    monkeypatch.delenv("SLURM_JWT", raising=False)
    monkeypatch.delenv("SLURM_JWT_FILE", raising=False)
    monkeypatch.delenv("SLURMRESTD_URL", raising=False)
    found = Connection.find({"SLURM_JWT_FILE": str(file), "SLURMRESTD_URL": "http://127.0.0.1:9/"})
    assert found == Connection("http://127.0.0.1:9", str(file)) and found.token() == token and user(token) == "alice"
    monkeypatch.setenv("SLURM_JWT", fake_token("bob"))
    assert user(found.token()) == "bob"
    # a job's memo names the slurmrestd it was submitted to; the environment's token file wins over the memo's
    monkeypatch.setenv("SLURMRESTD_URL", "http://127.0.0.1:8")
    memo = {"url": "http://127.0.0.1:7", "token_file": "/m"}
    assert Connection.find({}, memo) == Connection("http://127.0.0.1:7", "/m")
    assert Connection.find({}) == Connection("http://127.0.0.1:8", None)


def test_no_token_or_an_expired_one_is_a_clear_error_without_the_token(monkeypatch, tmp_path):
    monkeypatch.delenv("SLURM_JWT", raising=False)
    monkeypatch.delenv("SLURM_JWT_FILE", raising=False)
    with pytest.raises(CommandError, match="no Slurm token for slurmrestd") as exc:
        Connection().token()
    assert "SLURM_JWT_FILE" in str(exc.value)
    with pytest.raises(CommandError, match="cannot read the Slurm token file"):
        Connection(token_file=str(tmp_path / "missing")).token()
    old = fake_token(expires=time.time() - 60)
    monkeypatch.setenv("SLURM_JWT", old)
    with pytest.raises(CommandError, match=r"the Slurm token \(SLURM_JWT\) expired at \d{4}-") as exc:
        Connection().token()
    assert old not in str(exc.value)
    assert claims("not-a-jwt") == {} and claims("a.b.c") == {}


# --- recorded answers, replayed ----------------------------------------------------------------------------------


class _Replay(BaseHTTPRequestHandler):
    routes: dict[tuple[str, str], dict] = {}
    seen: list[tuple[str, str, dict]] = []

    def _answer(self) -> None:
        length = int(self.headers.get("Content-Length") or 0)
        body = json.loads(self.rfile.read(length)) if length else {}
        headers = {k.lower(): v for k, v in self.headers.items()}
        type(self).seen.append((self.command, self.path, {**headers, "body": body}))
        found = self.routes.get((self.command, self.path))
        status, answer = (found["status"], found["answer"]) if found else (404, "no such route")
        raw = (json.dumps(answer) if isinstance(answer, dict) else answer).encode()
        self.send_response(status)
        self.send_header("Content-Length", str(len(raw)))
        self.end_headers()
        self.wfile.write(raw)

    do_GET = do_POST = do_DELETE = _answer

    def log_message(self, *args: object) -> None:
        pass


@pytest.fixture
def replay(monkeypatch, hpc_home) -> Iterator[dict[tuple[str, str], dict]]:
    """A slurmrestd on 127.0.0.1 that answers with the recorded files: routes[(method, path)] = file."""
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Replay)
    _Replay.routes, _Replay.seen = {}, []
    versions.forget()
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    monkeypatch.setenv("SLURMRESTD_URL", f"http://127.0.0.1:{server.server_port}")
    monkeypatch.setenv("SLURM_JWT", fake_token())
    monkeypatch.delenv("SLURM_JWT_FILE", raising=False)
    yield _Replay.routes
    server.shutdown()
    versions.forget()


def route(routes: dict, name: str, path: str | None = None, release: str = "22.05") -> dict:
    """Serve the recorded `name` of `release`, and that release's `GET /openapi/v3`."""
    data = recorded(name, release)
    routes[(data["method"], path or data["path"])] = data
    routes[("GET", versions.SPEC)] = {"status": 200, "answer": openapi(release)}
    return data


def asked(skip_spec: bool = True) -> list[tuple[str, str]]:
    """The requests the replayed slurmrestd saw (but the version's `GET /openapi/v3`)."""
    return [(m, p) for m, p, _ in _Replay.seen if not (skip_spec and p == versions.SPEC)]


def _job_id(name: str, release: str = "22.05") -> str:
    return re.search(r"/job/(\w+)$", recorded(name, release)["path"]).group(1)  # type: ignore[union-attr]


@pytest.mark.parametrize("release", RELEASES)
@pytest.mark.parametrize("name, state, reason, words", [
    ("job-held", "PENDING", "JobHeldUser", "held by its owner (`scontrol release {id}`)"),
    ("job-dependency", "PENDING", "Dependency", "waiting for the job(s) it depends on to finish"),
    ("job-running", "RUNNING", None, None),
    ("job-completed", "COMPLETED", None, None),
    ("job-failed", "FAILED", "NonZeroExitCode", "the job exited with a non-zero code"),
    ("job-cancelled", "CANCELLED", None, None),
])
def test_status_from_recorded_answers(replay, name, state, reason, words, release):
    route(replay, name, release=release)
    job = _job_id(name, release)
    found = SlurmRestScheduler().status([job])[job]
    assert (found.state, found.reason, found.source) == (state, reason, "slurmrestd")
    if words:
        assert found.reason_text is not None and found.reason_text.startswith(words.format(id=job))
    else:
        assert found.reason_text is None
    if state == "FAILED":
        assert found.exit_code == "3:0"
    if state == "RUNNING":
        assert found.nodes and found.time_limit == "5:00"
    assert asked() == [("GET", recorded(name, release)["path"])]


@pytest.mark.parametrize("release", RELEASES)
def test_an_array_is_summed_up_and_its_tasks_answer_alone(replay, release):
    data = route(replay, "job-array", release=release)
    array = _job_id("job-array", release)
    found = SlurmRestScheduler().status([array, f"{array}_0", f"{array}_1"])
    assert found[array].state == "RUNNING" and found[f"{array}_0"].state == "RUNNING"
    assert found[f"{array}_1"].state == "PENDING"
    assert found[f"{array}_1"].reason_text is not None
    assert len(data["answer"]["jobs"]) >= 2


@pytest.mark.parametrize("release, version", [("22.05", "v0.0.38"), ("26.05", "v0.0.45")])
def test_a_job_slurmctld_forgot_is_asked_from_slurmdbd_then_unknown(replay, release, version):
    unknown = route(replay, "job-unknown", release=release)
    assert unknown["status"] >= 400 and errors(unknown["answer"])  # 22.05: HTTP 500; 26.05: HTTP 404, both 2017
    route(replay, "db-job-unknown", release=release)
    found = SlurmRestScheduler().status(["999999"])["999999"]
    assert found.state == "UNKNOWN"
    # the version once (GET /openapi/v3), then slurmctld, then slurmdbd
    assert asked(skip_spec=False) == [("GET", "/openapi/v3"), ("GET", f"/slurm/{version}/job/999999"),
                                      ("GET", f"/slurmdb/{version}/job/999999")]


@pytest.mark.parametrize("release", RELEASES)
def test_usage_from_slurmdbd_equals_sacct(replay, release):
    route(replay, "db-job-completed", release=release)
    job = _job_id("db-job-completed", release)
    rest = SlurmRestScheduler().usage(job)
    sacct = accounting.from_sacct((RELEASES[release][0] / "db-job-completed.sacct.txt").read_text(), job)
    assert rest is not None and sacct is not None
    assert rest.pop("source") == "slurmdbd" and sacct.pop("source") == "sacct"
    assert rest.pop("cpu_s") == pytest.approx(sacct.pop("cpu_s"), abs=0.01)
    assert rest == sacct
    assert rest["max_rss_bytes"] > 50 * 2**20


@pytest.mark.parametrize("release, version", [("22.05", "v0.0.38"), ("26.05", "v0.0.45")])
def test_usage_of_an_array_task_is_its_record_not_its_arrays(replay, release, version):
    array = _job_id("db-job-array", release)
    data = route(replay, "db-job-array", path=f"/slurmdb/{version}/job/{array}_0", release=release)
    used = SlurmRestScheduler().usage(f"{array}_0")
    assert used is not None and used["source"] == "slurmdbd"
    task0 = [j for j in data["answer"]["jobs"] if json.dumps(j["array"]["task_id"]) in ("0", json.dumps(
        {"set": True, "infinite": False, "number": 0}))]
    assert len(task0) == 1 and str(task0[0]["job_id"]) != array  # the task's own job id is another


@pytest.mark.parametrize("release, version", [("22.05", "v0.0.38"), ("26.05", "v0.0.45")])
def test_submit_sends_the_script_and_its_fields_with_the_token_in_a_header_only(replay, hpc_home, release, version):
    from hpclaunch.submission.submit import dry_run

    route(replay, "submit", path=f"/slurm/{version}/job/submit", release=release)
    prepared = dry_run(resolve("gpt2", "dev-slurm-rest", CliOverrides(preset="tiny", layout="2n1g")))
    job_id = SlurmRestScheduler().submit(prepared.script_path, prepared.run_dir, ["12:any"])
    assert job_id == str(recorded("submit", release)["answer"]["job_id"])
    (_, (method, path, sent)) = _Replay.seen
    assert (method, path) == ("POST", f"/slurm/{version}/job/submit")
    assert sent["x-slurm-user-name"] == "root" and sent["x-slurm-user-token"].count(".") == 2
    assert sent["body"]["script"] == prepared.script
    job = sent["body"]["job"]
    assert job["dependency"] == "afterany:12" and job["nodes"] == "2"
    if version == "v0.0.38":
        assert job["time_limit"] == "00:20:00" and job["environment"]["PATH"]
    else:  # the data_parser's shapes
        assert job["time_limit"] == {"set": True, "infinite": False, "number": 20}
        assert "SLURM_GET_USER_ENV=1" in job["environment"] and job["tres_per_node"] == "gres/gpu:1"
    assert sent["x-slurm-user-token"] not in json.dumps(sent["body"])
    memo = json.loads((prepared.run_dir / "slurm-rest" / "connection.json").read_text())
    assert memo == {"url": Connection.find().url, "token_file": "~/.slurm-jwt"}


@pytest.mark.parametrize("release, name, words, token_hint", [
    # a token slurmctld or slurmdbd refuses (its signature is not the cluster's): slurmrestd 22.05's words
    ("22.05", "auth-refused", "slurmctld config is unable to load (Unspecified error, -1)", "may be refused"),
    ("22.05", "submit-auth-refused", "Zero Bytes were transmitted or received (5005)", "the token was refused"),
    ("22.05", "db-auth-refused", "Protocol authentication error (1007)", "the token was refused"),
    ("22.05", "auth-missing", "slurmctld config is unable to load", "may be refused"),
    ("22.05", "submit-refused", "Invalid SIGNAL specification (-1); Unable to process key \"signal\"",
     "may be refused"),
    ("22.05", "submit-disabled-field", 'Disabled key: "export" (Operation not permitted, 1)', None),
    # 26.05's: HTTP 511 and 1007 from slurmctld; v0.0.38's strings refused, naming the field
    ("26.05", "submit-auth-refused", "Batch job submission failed (Protocol authentication error, 1007)",
     "the token was refused"),
    ("26.05", "job-auth-refused", "Unable to query JobId=1 (Protocol authentication error, 1007)",
     "the token was refused"),
    ("26.05", "submit-old-shapes",
     'Expected integer but got "00:05:00" (Unable to convert Data type, 9202) at job/time_limit', None),
])
def test_refusals_are_errors_with_the_url_and_slurmrestd_words_never_the_token(replay, release, name, words,
                                                                                token_hint):
    data = route(replay, name, release=release)
    token = fake_token()
    with pytest.raises(RestError) as exc:
        Connection.find().request(data["method"], data["path"], {"script": "#!/bin/bash\n"})
    text = str(exc.value)
    assert f"{data['method']} {Connection.find().url}{data['path']}: HTTP {data['status']}" in text
    assert words in text and token not in text
    assert (token_hint is not None and token_hint in text) or (token_hint is None and "token" not in text), text
    assert exc.value.refused_token == (token_hint == "the token was refused")


def test_a_job_queued_with_a_field_slurmrestd_could_not_read_is_cancelled_and_said(replay, hpc_home):
    """26.05 queues a job whose kill_warning_signal it cannot read and says so in `errors` (number 0)."""
    from hpclaunch.submission.submit import dry_run

    data = route(replay, "submit-refused", release="26.05")
    job_id = str(data["answer"]["job_id"])
    replay[("DELETE", f"/slurm/v0.0.45/job/{job_id}")] = recorded("cancel", "26.05")
    prepared = dry_run(resolve("allreduce", "dev-slurm-rest", CliOverrides(layout="1n1g")))
    with pytest.raises(CommandError) as exc:
        SlurmRestScheduler().submit(prepared.script_path, prepared.run_dir)
    assert (f"slurmrestd queued job {job_id} from POST {Connection.find().url}/slurm/v0.0.45/job/submit but did not "
            "read all of its description: Unknown signal (null) (No error, 0) at job/kill_warning_signal; the job "
            "was cancelled") in str(exc.value)
    assert asked() == [("POST", "/slurm/v0.0.45/job/submit"), ("DELETE", f"/slurm/v0.0.45/job/{job_id}")]


@pytest.mark.parametrize("release", RELEASES)
def test_cancel_is_a_delete_and_a_done_job_cancels_quietly(replay, release):
    for name in ("cancel", "cancel-again"):
        route(replay, name, release=release)
        SlurmRestScheduler().cancel(_job_id(name, release))
    assert [m for m, _ in asked()] == ["DELETE", "DELETE"]


def test_unreachable_slurmrestd_names_the_address(monkeypatch):
    monkeypatch.setenv("SLURM_JWT", fake_token())
    with pytest.raises(CommandError, match=r"cannot reach slurmrestd: GET http://127\.0\.0\.1:9/slurm/v0\.0\.38/ping"):
        Connection("http://127.0.0.1:9").request("GET", "/slurm/v0.0.38/ping")


@pytest.mark.parametrize("release", RELEASES)
def test_the_queued_job_of_a_run_directory_is_found_by_its_working_directory(release):
    jobs = recorded("jobs", release)["answer"]
    some = next(j for j in jobs["jobs"] if j.get("current_working_directory"))
    assert answers.job_in(jobs, Path(some["current_working_directory"])) is not None
    assert answers.job_in(jobs, Path("/nowhere")) is None
    arrays = [j for j in jobs["jobs"] if j["name"] == "fixture-array"]
    assert {answers.job_in({"jobs": [j]}, Path(j["current_working_directory"])) for j in arrays} == {
        _job_id("job-array", release)}  # a task's own id gives its array's


@pytest.mark.parametrize("release, words", [("22.05", "Slurm 22.05.8, OpenAPI v0.0.38"),
                                            ("26.05", "Slurm 26.05.5, OpenAPI v0.0.45")])
def test_profiles_check_compares_the_partitions(hpc_home, release, words):
    from hpclaunch.config.loader import load_profile

    checks = answers.partition_checks(recorded("partitions", release)["answer"], load_profile("dev-slurm-rest"))
    assert [(c.name, c.ok) for c in checks] == [("partition debug", True)], checks
    assert checks[0].result == "4 nodes x 4 GPUs, 4 CPUs per node, 120 min"
    assert answers.release(recorded("ping", release)["answer"]) == words


def test_the_backend_is_registered_and_slurm_rest_stays_behind_the_interface():
    assert type(get_scheduler("slurm-rest")) is SlurmRestScheduler
    repo = Path(__file__).resolve().parents[2] / "hpclaunch"
    outside = [p for p in repo.rglob("*.py") if "schedulers" not in p.relative_to(repo).parts]
    assert not [p for p in outside if "slurm_rest" in p.read_text(encoding="utf-8")
                and p.name != "backends.py"]
