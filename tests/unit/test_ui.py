"""The web view (hpclaunch/ui/, docs/ui.md) without a browser: its guard (no token, a wrong token, the token once
then the cookie, another Host, a cross-site request, anything but GET, a path outside the run root in a job id, a
rank, a chart or a static file's name), its pages made from a run directory written here (a job with two restarts,
a recovery, checkpoints, an eval; a name and a log line that are HTML), the chart data, the vendored uPlot's
checksums, `hpclaunch ui --check`, and the SSH tunnel's command. The same pages in a real browser against real jobs:
tests/integration/test_ui_browser.py."""

from __future__ import annotations

import hashlib
import http.client
import json
import re
from pathlib import Path

import pytest

pytest.importorskip("starlette")
pytest.importorskip("uvicorn")

from starlette.testclient import TestClient  # noqa: E402

from hpclaunch.errors import ConfigError  # noqa: E402
from hpclaunch.state.runfiles import RunFiles  # noqa: E402
from hpclaunch.ui import gantt, serve  # noqa: E402
from hpclaunch.ui.app import build  # noqa: E402
from hpclaunch.ui.guard import Guard  # noqa: E402
from hpclaunch.ui.html import Html, h, tag  # noqa: E402
from tests.fixtures.jobrecords import add_local_record  # noqa: E402

PORT = 8765
TOKEN = "t0ken-for-the-test_0123456789abcdefABCDEF"
JOB = "local-9001"
EVIL_NAME = "<img src=x onerror=alert(1)>"
EVIL_LINE = "</pre><script>alert('log')</script>"
STATIC = Path(__file__).resolve().parents[2] / "hpclaunch" / "ui" / "static"
T0 = 1_800_000_000.0


def write_run(run_dir: Path) -> RunFiles:
    """A run as the job writes it: two restarts of one job (a fault at step 6, relaunched inside the allocation,
    resumed from the checkpoint of step 4), eight steps of metrics and an eval, two checkpoints, rank logs."""
    files = RunFiles(run_dir)
    files.logs.mkdir(parents=True)
    files.metrics.mkdir(parents=True)
    stamps = [("submitted", 0, 0.0), ("started", 0, 2.0), ("env_ready", 0, 3.0), ("launched", 0, 3.5),
              ("ranks_started", 0, 5.0), ("imports_done", 0, 8.0), ("rendezvous_done", 0, 8.5),
              ("model_loaded", 0, 9.0), ("data_ready", 0, 9.5), ("first_step", 0, 10.0), ("finished", 0, 16.0),
              ("launched", 1, 17.0), ("ranks_started", 1, 18.0), ("imports_done", 1, 20.0),
              ("rendezvous_done", 1, 20.5), ("model_loaded", 1, 21.0), ("data_ready", 1, 21.5),
              ("first_step", 1, 22.0), ("finished", 1, 26.0)]
    files.timeline.write_text("".join(json.dumps({"phase": p, "restart": r, "job": JOB, "t": T0 + t}) + "\n"
                                      for p, r, t in stamps))
    records = [{"step": s, "loss": 7.0 - 0.1 * s, "tokens_per_s": 1000.0 + s, "lr": 1e-3, "time": T0 + 10 + s}
               for s in range(1, 9)]
    records.append({"step": 8, "eval_loss": 6.5, "perplexity": 665.1, "kind": "eval"})
    files.metrics_file(0).write_text("".join(json.dumps(r) + "\n" for r in records) + "not json\n")
    files.checkpoint_log.write_text(
        json.dumps({"step": 4, "why": "interval", "blocked_s": 0.2, "write_s": 0.5, "bytes": 2 ** 20, "async": True,
                    "restart": 0, "job": JOB, "at": T0 + 14.0}) + "\n"
        + json.dumps({"step": 8, "why": "final", "blocked_s": 0.1, "write_s": 0.4, "bytes": 2 ** 20, "async": True,
                      "restart": 1, "job": JOB, "at": T0 + 25.5}) + "\n")
    files.recoveries.write_text(json.dumps({"cause": "killed", "rank": 1, "node": "node1", "detected_at": T0 + 16.0,
                                            "resumed_step": 4, "resumed_restart": 1, "nodes": "node1"}) + "\n")
    files.rank_log(0, 0).write_text("step 1 loss 6.9\n" + EVIL_LINE + "\n")
    files.rank_log(1, 0).write_text("rank one speaks\n")
    return files


@pytest.fixture
def run(hpc_home: Path) -> RunFiles:
    run_dir = hpc_home / "runs" / "20261129-000000-gpt2-abcdef"
    files = write_run(run_dir)
    (run_dir / "resolved.yaml").write_text("train:\n  max_steps: 8\n")
    add_local_record(JOB, run_dir, recipe="gpt2", preset="tiny", name=EVIL_NAME)
    return files


@pytest.fixture
def client(run: RunFiles) -> TestClient:
    return TestClient(build(Guard(TOKEN, (PORT, 9100))), base_url=f"http://127.0.0.1:{PORT}", follow_redirects=False)


def with_cookie(client: TestClient) -> TestClient:
    client.cookies.set(f"hpclaunch-ui-{PORT}", TOKEN)
    return client


# --- the guard


@pytest.mark.parametrize("path", ["/", f"/job/{JOB}", f"/job/{JOB}/live", f"/job/{JOB}/chart/loss", "/plan",
                                  "/avail", "/static/ui.js", "/nothing-here"])
def test_without_the_token_every_path_is_refused(client, path):
    res = client.get(path)
    assert res.status_code == 403 and "no token" in res.text
    assert TOKEN not in res.text and EVIL_NAME not in res.text


def test_a_wrong_token_is_refused_and_the_right_one_becomes_a_strict_httponly_cookie(client):
    for wrong in ("", "x", TOKEN[:-1], TOKEN + "x", TOKEN.upper()):
        res = client.get("/", params={"token": wrong})
        assert res.status_code == 403 and "wrong token" in res.text, wrong
    res = client.get(f"/job/{JOB}", params={"token": TOKEN, "rank": "1"})
    assert res.status_code == 303
    assert res.headers["location"] == f"/job/{JOB}?rank=1"  # the token leaves the URL, the rest stays
    cookie = res.headers["set-cookie"]
    assert cookie.startswith(f"hpclaunch-ui-{PORT}={TOKEN};")
    assert "HttpOnly" in cookie and "SameSite=Strict" in cookie and "Path=/" in cookie
    page = client.get(f"/job/{JOB}")  # the client keeps the cookie, as a browser does
    assert page.status_code == 200 and "<h1>Job local-9001" in page.text


def test_a_redirect_with_the_token_never_leaves_for_another_site(client):
    res = client.get("//evil.example/x", params={"token": TOKEN})
    assert res.status_code == 303 and res.headers["location"].startswith("/") \
        and not res.headers["location"].startswith("//")


@pytest.mark.parametrize("host", ["evil.example:8765", "evil.example", "127.0.0.1:9999", "127.0.0.1", "",
                                  "0.0.0.0:8765", "127.0.0.1.evil.example:8765", "[::1]:8765"])
def test_another_host_name_is_refused_even_with_the_cookie(client, host):
    res = with_cookie(client).get("/", headers={"host": host})
    assert res.status_code == 403 and "127.0.0.1 or localhost" in res.text


def test_localhost_and_the_tunnels_port_are_this_view(client):
    with_cookie(client)
    for host in (f"localhost:{PORT}", f"127.0.0.1:{PORT}", "127.0.0.1:9100"):
        assert client.get("/", headers={"host": host}).status_code == 200, host


@pytest.mark.parametrize("headers", [{"sec-fetch-site": "cross-site"}, {"sec-fetch-site": "same-site"},
                                     {"origin": "http://evil.example"}, {"origin": "http://127.0.0.1:9999"},
                                     {"origin": "null"},
                                     {"sec-fetch-site": "same-origin", "origin": "https://127.0.0.1:8765"}])
def test_a_cross_site_request_is_refused(client, headers):
    res = with_cookie(client).get(f"/job/{JOB}/live", headers=headers)
    assert res.status_code == 403 and "refused" in res.text


def test_a_request_of_this_view_itself_passes(client):
    headers = {"sec-fetch-site": "same-origin", "origin": f"http://127.0.0.1:{PORT}"}
    assert with_cookie(client).get(f"/job/{JOB}/live", headers=headers).status_code == 200
    assert client.get("/", headers={"sec-fetch-site": "none"}).status_code == 200  # typed, or from the terminal


@pytest.mark.parametrize("method", ["POST", "PUT", "DELETE", "PATCH"])
def test_it_is_read_only(client, method, run):
    before = sorted(p.name for p in run.root.rglob("*"))
    res = with_cookie(client).request(method, f"/job/{JOB}", params={"token": TOKEN})
    assert res.status_code == 405 and "read-only" in res.text
    assert sorted(p.name for p in run.root.rglob("*")) == before


def test_every_answer_keeps_the_page_to_itself(client):
    for path in ("/", f"/job/{JOB}", "/static/uPlot.iife.min.js"):
        res = with_cookie(client).get(path)
        csp = res.headers["content-security-policy"]
        assert "default-src 'none'" in csp and "script-src 'self'" in csp and "connect-src 'self'" in csp
        assert "frame-ancestors 'none'" in csp and res.headers["x-frame-options"] == "DENY"
        assert res.headers["referrer-policy"] == "no-referrer" and res.headers["x-content-type-options"] == "nosniff"
    assert client.get("/").headers["cache-control"] == "no-store"
    refused = TestClient(client.app, base_url=f"http://127.0.0.1:{PORT}").get("/")
    assert refused.status_code == 403 and "default-src 'none'" in refused.headers["content-security-policy"]


def test_the_pages_load_nothing_from_anywhere_else(client):
    with_cookie(client)
    for path in ("/", f"/job/{JOB}", "/plan", "/avail?profile=local"):
        text = client.get(path).text
        urls = re.findall(r'(?:src|href|action)="([^"]*)"', text)
        assert urls and all(u == "" or u.startswith(("/", "#")) for u in urls), (path, urls)
        assert "http://" not in text.replace('xmlns="http://www.w3.org/2000/svg"', "") and "https://" not in text
    js = (STATIC / "ui.js").read_text()
    assert "http" not in js.replace("https://", "").split("\n", 4)[-1]  # no address in its code


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory):
    """The real thing on loopback, one for the module: uvicorn answers bytes exactly as sent (no client normalizes
    the path)."""
    root = tmp_path_factory.mktemp("ui-server")
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("HPCLAUNCH_HOME", str(root / "home"))
        mp.setenv("HPCLAUNCH_PATH", str(Path(__file__).resolve().parents[1] / "fixtures"))
        mp.setenv("XDG_CONFIG_HOME", str(root / "xdg-config"))
        run_dir = root / "home" / "runs" / "20261129-000000-gpt2-abcdef"
        write_run(run_dir)
        add_local_record(JOB, run_dir, recipe="gpt2", preset="tiny", name=EVIL_NAME)
        view = serve.make(None)
        view.start()
        yield view
        view.stop()


def raw_get(view: serve.View, path: str, headers: dict[str, str] | None = None) -> tuple[int, str]:
    conn = http.client.HTTPConnection("127.0.0.1", view.port, timeout=60)
    conn.putrequest("GET", path, skip_host=True, skip_accept_encoding=True)
    conn.putheader("Host", f"127.0.0.1:{view.port}")
    conn.putheader("Cookie", f"{view.guard.cookie}={view.token}")
    for k, v in (headers or {}).items():
        conn.putheader(k, v)
    conn.endheaders()
    res = conn.getresponse()
    out = res.status, res.read().decode("utf-8", "replace")
    conn.close()
    return out


@pytest.mark.parametrize("path", [
    "/job/..", "/job/../../etc/passwd", "/job/..%2F..%2Fetc%2Fpasswd", "/job/%2e%2e", "/job/a/../../registry",
    "/job/..%2Fregistry%2Flocal-9001", "/job/local-9001%00", "/job/.hidden", f"/job/{'a' * 200}",
    "/job/local-9001/chart/..%2F..%2Fetc%2Fpasswd", "/job/local-9001/chart/loss%2F..",
    "/static/../guard.py", "/static/..%2Fguard.py", "/static/%2e%2e/guard.py", "/static/README.md",
    "/static/uPlot.LICENSE", "/static/", "/../../etc/passwd", "/job/..%5C..%5Cetc%5Cpasswd"])
def test_a_path_outside_the_run_root_is_never_served(server, path):
    status, text = raw_get(server, path)
    assert status in (400, 404), (path, status)
    assert "root:" not in text and "import" not in text and "Guard" not in text


def test_a_rank_that_is_no_number_is_refused(server):
    for rank in ("../../etc/passwd", "-1", "1e3", "0x1", "%2e%2e"):
        status, text = raw_get(server, f"/job/{JOB}?rank={rank}")
        assert status == 400 and "is not a number" in text, rank
    assert raw_get(server, f"/job/{JOB}?rank=1")[0] == 200


def test_the_real_server_refuses_without_the_token_and_from_another_host(server):
    conn = http.client.HTTPConnection("127.0.0.1", server.port, timeout=60)
    conn.request("GET", "/", headers={"Host": f"127.0.0.1:{server.port}"})
    assert conn.getresponse().status == 403
    conn.close()
    # a second Host header: refused (by h11 already, as a malformed request)
    assert raw_get(server, "/", {"Host": f"evil.example:{server.port}"})[0] in (400, 403)


# --- the pages


def test_the_job_page_draws_the_timeline_and_the_ledger(client):
    text = with_cookie(client).get(f"/job/{JOB}").text
    spans = re.findall(r'<rect x="[^"]+" y="[^"]+" width="[^"]+" height="[^"]+" class="bar (\w+)" '
                       r'data-span="(\w+)" data-restart="(\d)" data-seconds="([0-9.]+)"', text)
    found = {(span, restart): float(s) for _, span, restart, s in spans}
    assert found[("queued", "0")] == 2.0 and found[("imports", "0")] == 3.0 and found[("model_load", "0")] == 0.5
    assert found[("training", "0")] == 6.0 and found[("training", "1")] == 4.0
    assert found[("recovery", "1")] == 1.0  # from the end of restart 0 to the relaunch, inside the same job
    assert [k for _, k, r, _ in spans if k == "first_step"] == ["first_step", "first_step"]
    assert len(re.findall(r'class="tick checkpoint" data-step="(\d)"', text)) == 2
    assert 'class="tick fault" data-cause="killed"' in text
    assert 'data-goodput="' in text and "productive training" in text and "work done again" in text
    assert "killed" in text and "Checkpoints (2)" in text
    assert 'id="chart-loss" data-src="/job/local-9001/chart/loss"' in text
    assert "<noscript><p>the loss" in text and 'class="sparkline"' in text  # the curve without JavaScript


def test_html_from_a_job_is_text_not_markup(client):
    with_cookie(client)
    job = client.get(f"/job/{JOB}").text
    jobs = client.get("/").text
    assert EVIL_NAME not in job and EVIL_NAME not in jobs and "&lt;img src=x onerror=alert(1)&gt;" in jobs
    assert EVIL_LINE not in job and "&lt;/pre&gt;&lt;script&gt;alert(&#x27;log&#x27;)&lt;/script&gt;" in job
    assert "<script>alert" not in client.get(f"/job/{JOB}/live").text


def test_the_logs_of_one_rank(client):
    text = with_cookie(client).get(f"/job/{JOB}", params={"rank": "1"}).text
    assert "rank one speaks" in text and "step 1 loss 6.9" not in text
    assert '<a href="/job/local-9001?rank=0#logs" class="chip">rank 0</a>' in text


def test_the_charts_data_and_its_new_points(client):
    with_cookie(client)
    loss = client.get(f"/job/{JOB}/chart/loss").json()
    assert loss["x"] == list(range(1, 9))
    assert [s["label"] for s in loss["series"]] == ["loss", "eval loss"]
    assert loss["series"][0]["values"] == pytest.approx([7.0 - 0.1 * s for s in range(1, 9)])
    assert loss["series"][1]["values"] == [None] * 7 + [6.5]
    newer = client.get(f"/job/{JOB}/chart/throughput", params={"after": "5"}).json()
    assert newer["x"] == [6, 7, 8] and newer["series"][0]["values"] == [1006.0, 1007.0, 1008.0]
    assert client.get(f"/job/{JOB}/chart/secrets").status_code == 404
    assert client.get("/job/local-404/chart/loss").status_code == 404


def test_the_live_update_makes_the_changing_sections_again(client):
    data = with_cookie(client).get(f"/job/{JOB}/live").json()
    assert {"summary", "timeline", "goodput", "recoveries", "logs", "checkpoints"} <= set(data["sections"])
    assert data["sections"]["timeline"].startswith('<section id="timeline">')


def test_the_jobs_page_shows_each_job_with_its_progress_and_goodput(client):
    text = with_cookie(client).get("/").text
    row = re.search(r'<tr data-row="local-9001">(.*?)</tr>', text)[1]
    assert 'href="/job/local-9001"' in row and "8/8" in row and "6.2" in row and "%" in row
    assert '<noscript><meta http-equiv="refresh"' in text and 'data-live="/live"' in text
    assert 'class="chip">local</a>' in text
    assert client.get("/", params={"profile": "local"}).status_code == 200
    assert client.get("/live").json()["sections"]["jobs"].startswith('<section id="jobs">')


def test_an_unknown_job_is_a_page_that_says_so(client):
    res = with_cookie(client).get("/job/local-404")
    assert res.status_code == 404 and "hpclaunch jobs" in res.text


def test_the_plan_page_takes_only_names_it_lists(client):
    with_cookie(client)
    text = client.get("/plan", params={"recipe": "allreduce", "profile": "local"}).text
    assert '<option value="allreduce" selected>' in text
    for recipe in ("../../etc", "/etc/passwd", "recipes/gpt2"):
        text = client.get("/plan", params={"recipe": recipe}).text
        assert "selected" not in text.split('name="recipe"')[1].split("</select>")[0] and 'id="verdict"' not in text
    assert "is not NODESnGPUSg" in client.get("/plan", params={"recipe": "allreduce", "layout": "2n8g;x"}).text


def test_the_static_files_are_the_vendored_upLot_and_the_views_own():
    readme = (STATIC / "README.md").read_text()
    for name in ("uPlot.iife.min.js", "uPlot.min.css"):
        digest = hashlib.sha256((STATIC / name).read_bytes()).hexdigest()
        assert f"`{name}` `{digest}`" in readme, name
    assert (STATIC / "uPlot.iife.min.js").read_text().startswith("/*! https://github.com/leeoniya/uPlot (v1.6.32) */")
    assert "MIT" in (STATIC / "uPlot.LICENSE").read_text()


# --- the parts


def test_markup_is_escaped_unless_written_here():
    assert h("<b>") == "&lt;b&gt;" and h(Html("<b>")) == "<b>"
    assert Html("<i>") + "<b>" == "<i>&lt;b&gt;" and isinstance(Html("<i>") + "x", Html)
    assert tag("a", "<x>", href='"><script>', class_="c", hidden=True, skip=None) == \
        '<a href="&quot;&gt;&lt;script&gt;" class="c" hidden>&lt;x&gt;</a>'


def test_a_running_jobs_last_span_is_drawn_until_now():
    entry = {"restart": 0, "job": "1", "phases": {"submitted": 0.0, "started": 5.0, "first_step": 9.0}}
    assert gantt.bars(entry, None, {"started": "queued", "first_step": "first_step"}, now=20.0)[-1] == \
        ("training", 9.0, 20.0)
    requeued = {"restart": 1, "job": "2", "phases": {"started": 30.0}}
    assert gantt.bars(requeued, {"job": "1", "phases": {"finished": 12.0}}, {}, None)[0] == ("queued", 12.0, 30.0)


def test_curves_of_a_job_without_metrics_say_so(hpc_home):
    from hpclaunch import api

    run_dir = hpc_home / "runs" / "empty"
    run_dir.mkdir(parents=True)
    add_local_record("local-9002", run_dir)
    found = api.curves("local-9002")
    assert found.steps == [] and "no metrics yet" in found.notes[0]


def test_ui_check_starts_checks_and_stops(hpclaunch, run):
    res = hpclaunch("ui", "--check")
    assert res.exit_code == 0, res.output
    assert res.stdout.count("ok: ") == 7 and "FAILED" not in res.stdout


def test_a_port_taken_is_said_in_words(hpclaunch):
    view = serve.make(None)
    try:
        res = hpclaunch("ui", "--port", str(view.port), "--check")
        assert res.exit_code == 2 and "Address already in use" in res.stderr and "give another --port" in res.stderr
    finally:
        view.sock.close()


def test_the_tunnel_forwards_this_port_to_the_login_nodes_view(hpc_home):
    from hpclaunch.core.remote import SshHost, Target
    from hpclaunch.ui import tunnel

    host = SshHost(Target("login.example.org", "alice", 2222, known_hosts="/tmp/kh"))
    argv = tunnel.forward_argv(host, 8770, 8765)
    assert argv[0] == "ssh" and argv[-2:] == ["--", "login.example.org"]
    assert "-N" in argv and "ExitOnForwardFailure=yes" in argv and "ControlPath=none" in argv
    assert argv[argv.index("-L") + 1] == "127.0.0.1:8770:127.0.0.1:8765"
    assert "StrictHostKeyChecking=yes" in argv and "BatchMode=yes" in argv
    with pytest.raises(ConfigError, match="has no login node"):
        tunnel.login_of("local")
