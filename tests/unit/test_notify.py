"""Word when a job ends (notify:, docs/profiles.md#word-when-a-job-ends): real jobs on the local profile POST their end
to a real HTTP receiver on 127.0.0.1 and run a command with it; the job script's EXIT trap (a stop signal, a job
that goes on as another); the settings refused at submit with the key and the value named (exit 2); Slurm's
--mail-type in the rendered header. One job per outcome, made once for the module."""

from __future__ import annotations

import json
import re
import subprocess
import threading
from collections.abc import Iterator
from datetime import datetime
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest

from tests.fixtures.jobrecords import wait_local

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"
KEYS = {"job_id", "state", "exit_code", "cause", "run_dir", "recipe", "profile", "ended_at"}
RECIPE = "script: {script}\nlauncher: torchrun\ntask: test\nlayout: 1n1g\nlaunch: {{agent: none}}\n"


class Receiver:
    """An HTTP server on 127.0.0.1 (an ephemeral port) that keeps every POST: (path, headers, JSON body)."""

    def __init__(self) -> None:
        posts: list[tuple[str, dict[str, str], Any]] = []

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:  # noqa: N802 (http.server's name)
                body = self.rfile.read(int(self.headers["Content-Length"]))
                posts.append((self.path, dict(self.headers), json.loads(body)))
                self.send_response(204)
                self.end_headers()

            def log_message(self, *args: object) -> None:
                pass

        self.posts = posts
        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"

    def at(self, path: str) -> list[Any]:
        return [body for where, _, body in self.posts if where == path]


@pytest.fixture(scope="module")
def receiver() -> Iterator[Receiver]:
    r = Receiver()
    thread = threading.Thread(target=r.server.serve_forever, daemon=True)
    thread.start()
    yield r
    r.server.shutdown()
    r.server.server_close()


@pytest.fixture(scope="module")
def jobs(tmp_path_factory: pytest.TempPathFactory, receiver: Receiver) -> Iterator[dict[str, Any]]:
    """Two real local jobs, each with a webhook: one that completes (and whose command fails: the job does not),
    one whose script raises (and whose command writes what it got)."""
    from click.testing import CliRunner

    from hpclaunch.cli.main import cli

    root = tmp_path_factory.mktemp("notify")
    for name, code in (("good", "print('fine')\n"), ("bad", "raise RuntimeError('disk quota exceeded on /scratch')\n")):
        (root / name).mkdir()
        (root / name / "recipe.yaml").write_text(RECIPE.format(script="train.py"))
        (root / name / "train.py").write_text(code)
    got = root / "command-stdin.json"
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("HPCLAUNCH_HOME", str(root / "home"))
        mp.setenv("HPCLAUNCH_PATH", str(FIXTURES))
        mp.setenv("XDG_CONFIG_HOME", str(root / "xdg-config"))

        def submit(*args: str) -> tuple[str, Path]:
            result = CliRunner().invoke(cli, ["submit", *args, "--profile", "local"], catch_exceptions=False)
            assert result.exit_code == 0, result.output
            return (re.search(r"submitted job (\S+) ", result.output)[1],
                    Path(re.search(r"run directory: (\S+)", result.output)[1]))

        good = submit(str(root / "good"), "--notify", f"{receiver.url}/good", "--set", "notify.command=exit 3")
        bad = submit(str(root / "bad"), "--notify", f"cat > {got}; printf %s \"$HPCLAUNCH_NOTIFY_STATE\" > {got}.state",
                     "--set", f"notify.webhook={receiver.url}/bad")
        states = {job: wait_local(job, timeout=60) for job, _ in (good, bad)}
        yield {"good": good, "bad": bad, "states": states, "got": got}


def test_a_job_that_completes_posts_its_end_once(jobs, receiver):
    job_id, run_dir = jobs["good"]
    assert jobs["states"][job_id] == "COMPLETED"  # its notify command failed: the job did not
    [body] = receiver.at("/good")
    assert set(body) == KEYS
    assert body["job_id"] == job_id and body["state"] == "COMPLETED" and body["exit_code"] == 0
    assert body["cause"] is None and body["run_dir"] == str(run_dir)
    assert body["recipe"] == "good" and body["profile"] == "local"
    assert datetime.fromisoformat(body["ended_at"]).utcoffset().total_seconds() == 0
    [headers] = [h for where, h, _ in receiver.posts if where == "/good"]
    assert headers["Content-Type"] == "application/json"
    output = next((run_dir / "logs").glob("job.*.out")).read_text()
    assert f"hpclaunch: notify: job {job_id} COMPLETED: posted to {receiver.url} (HTTP 204)" in output
    assert f"hpclaunch: notify: job {job_id} COMPLETED: no word to the command: the command exited with 3" in output


def test_a_job_that_fails_posts_failed_with_its_first_error_line(jobs, receiver):
    job_id, run_dir = jobs["bad"]
    assert jobs["states"][job_id] == "FAILED"
    [body] = receiver.at("/bad")
    assert body["job_id"] == job_id and body["state"] == "FAILED" and body["exit_code"] == 1
    assert body["cause"] == "RuntimeError: disk quota exceeded on /scratch"


def test_the_command_gets_the_same_json_on_stdin_and_the_variables(jobs, receiver):
    assert json.loads(jobs["got"].read_text()) == receiver.at("/bad")[0]
    assert Path(f"{jobs['got']}.state").read_text() == "FAILED"


def test_a_resubmitted_resolved_yaml_keeps_the_notify_of_the_command_line(jobs, receiver, hpclaunch):
    _, run_dir = jobs["good"]
    result = hpclaunch("submit", str(run_dir / "resolved.yaml"), "--dry-run")
    assert result.exit_code == 0, result.output
    assert f'"webhook": "{receiver.url}/good"' in result.stdout and "trap \"$hpclaunch_at_exit\" EXIT" in result.stdout


def _notify_block(hpclaunch, webhook: str) -> str:
    """The notify part of a local job script (blocks/notify.sh.j2), as rendered for `webhook`."""
    result = hpclaunch("submit", "allreduce", "--profile", "local", "--notify", webhook, "--dry-run")
    assert result.exit_code == 0, result.output
    block = re.search(r"^# --- word when the job ends.*?(?=^# --- the job)", result.stdout, re.S | re.M)
    return 'hpclaunch_t0=$(date +%s.%N); export HPCLAUNCH_JOB_ID=trap-test\n' + block[0]


def test_a_stop_signal_before_the_launch_sends_cancelled_and_a_job_that_goes_on_sends_nothing(hpclaunch, receiver):
    block = _notify_block(hpclaunch, f"{receiver.url}/trap")
    stopped = subprocess.run(["bash", "-c", block + 'kill -TERM $$\nsleep 30\n'], capture_output=True, text=True,
                             timeout=60)
    assert stopped.returncode == 143, stopped.stderr
    goes_on = subprocess.run(["bash", "-c", block + "hpclaunch_goes_on=requeued\nexit 0\n"], capture_output=True,
                             text=True, timeout=60)
    assert goes_on.returncode == 0 and "notify" not in goes_on.stdout + goes_on.stderr
    [body] = receiver.at("/trap")
    assert body["state"] == "CANCELLED" and body["exit_code"] == 143
    assert body["cause"] == "stopped by a signal (cancelled, or preempted)"


def test_a_webhook_that_is_down_is_one_line_of_words():
    from hpclaunch.runtime.node.notify import post

    with ThreadingHTTPServer(("127.0.0.1", 0), BaseHTTPRequestHandler) as closed:
        url = f"http://127.0.0.1:{closed.server_address[1]}/secret-token"
    with pytest.raises(RuntimeError, match=r"^http://127\.0\.0\.1:\d+: Connection refused$"):
        post(url, b"{}")


@pytest.mark.parametrize(("exit_code", "stopped", "end", "state"), [
    (0, False, None, "COMPLETED"), (1, False, None, "FAILED"), (143, True, None, "CANCELLED"),
    (143, True, 1200.0, "CANCELLED"), (143, True, 1030.0, "TIMEOUT"), (0, True, 990.0, "TIMEOUT")])
def test_the_state_as_the_job_sees_itself(exit_code, stopped, end, state):
    """A stop signal within a minute of the job's end (HPCLAUNCH_END_TIME) or after it is the time limit's."""
    from hpclaunch.runtime.node.notify import state_of

    assert state_of(exit_code, stopped, end, now=1000.0) == state


def test_when_chooses_the_ends_that_send_word():
    from hpclaunch.runtime.node.notify import wanted

    assert wanted(["ended"], "COMPLETED") and wanted(["ended"], "TIMEOUT")
    assert wanted(["failed"], "CANCELLED") and not wanted(["failed"], "COMPLETED")
    assert wanted(["completed"], "COMPLETED") and not wanted(["completed"], "FAILED")


@pytest.mark.parametrize(("args", "words"), [
    (("--notify", "ftp://example.org/x"), ["--notify ftp://example.org/x", "notify.webhook", "'ftp://example.org/x'"]),
    (("--set", "notify.webhook=hooks.example.org/x"), ["notify.webhook", "'hooks.example.org/x'", "http"]),
    (("--set", "notify.when=sometimes"), ["notify.when[0]", "'sometimes'", "'ended', 'completed' or 'failed'"]),
    (("--set", "notify.mail.type=END"), ["notify.mail", "END", "local scheduler", "sends no mail"]),
    (("--profile", "dev-slurm", "--set", "notify.mail.type=END,FINISH"), ["notify.mail.type", "'FINISH'", "BEGIN"]),
])
def test_a_bad_notify_is_refused_at_submit_naming_the_key_and_the_value(hpclaunch, args, words):
    profile = () if "--profile" in args else ("--profile", "local")
    result = hpclaunch("submit", "allreduce", *profile, *args, "--dry-run")
    assert result.exit_code == 2, result.output
    for word in words:
        assert word in result.stderr, result.stderr


def test_a_profile_file_with_a_bad_webhook_is_named(hpclaunch, write_profile, base_profile):
    path = write_profile({**base_profile, "notify": {"webhook": "http://", "when": "failed"}})
    result = hpclaunch("submit", "allreduce", "--profile", str(path), "--dry-run")
    assert result.exit_code == 2
    assert f"{path}: notify.webhook: not an http:// or https:// URL" in result.stderr and "'http://'" in result.stderr


def test_the_slurm_header_carries_mail_type_and_user(hpclaunch):
    result = hpclaunch("submit", "allreduce", "--profile", "dev-slurm", "--set", "notify.mail.type=end,fail",
                       "--set", "notify.mail.user=me@site.org", "--dry-run")
    assert result.exit_code == 0, result.output
    header = result.stdout.split("\nset -o pipefail", 1)[0]
    assert "#SBATCH --mail-type=END,FAIL\n" in header and "#SBATCH --mail-user=me@site.org\n" in header
    assert "hpclaunch_notify" not in result.stdout  # mail alone: the scheduler's word, nothing in the job
