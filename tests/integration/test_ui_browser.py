"""`hpclaunch ui` in a real browser: one headless Chromium (tests/browser.py, the DevTools protocol over a pipe)
opens every page of the view, served by the real command, against real jobs of the `local` profile run here (GPT-2
tiny on two ranks with a straggler, a rank killed at step 8 and recovered inside the allocation; a script whose
rank raises; a two-element sweep) and one on the dev cluster (`dev-slurm`). It checks what a person sees: the Gantt
bars of each phase and restart, the recovery and the checkpoints on them, the loss curve's points growing while the
job runs (without reloading) and then equal to the metrics, the goodput ledger's numbers, the diagnosis quoting the
error line, the sweep's losses on one plot, the plan's verdict; the page refreshing itself with JavaScript off; and
the guard as a browser meets it: no cookie, a wrong token, a name that points at 127.0.0.1 (DNS rebinding), another
site's page asking for the view, a path outside the run root.

Screenshots: into a temporary folder; with HPCLAUNCH_UI_SCREENSHOTS=1 into docs/ui/ (the ones docs/ui.md shows)."""

from __future__ import annotations

import http.server
import json
import os
import re
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from tests.browser import CHROMIUM, Browser
from tests.conftest import slurm_available

REPO = Path(__file__).resolve().parents[2]
INTERVAL = 1  # seconds between the live updates (the view's --interval)
STEPS = 16  # of the job watched live
BOOM = '''"""Fails the way a training script does: rank 1 raises while the others wait."""
import os
import time

if os.environ.get("RANK") == "1":
    raise ValueError("loss is nan at step 3 (the test's own failure)")
time.sleep(30)
'''

pytestmark = [pytest.mark.slow, pytest.mark.skipif(CHROMIUM is None, reason="no chromium (apt-get install chromium; "
                                                                             "scripts/dev-cluster.sh up installs it)")]


def _submitted(output: str) -> str:
    return re.search(r"submitted (?:sweep|job array|job) ([\w.+-]+)", output)[1]


@pytest.fixture(scope="module")
def view(tmp_path_factory: pytest.TempPathFactory):
    """Three local jobs queued at once, the view serving their home, its URL and token; the screenshot folder."""
    from click.testing import CliRunner

    from hpclaunch.cli.main import cli

    root = tmp_path_factory.mktemp("ui-browser")
    env = {"HPCLAUNCH_HOME": str(root / "home"), "HPCLAUNCH_PATH": str(REPO / "tests" / "fixtures"),
           "XDG_CONFIG_HOME": str(root / "xdg")}
    with pytest.MonkeyPatch.context() as mp:
        for k, v in env.items():
            mp.setenv(k, v)
        runner = CliRunner()

        def run(*args: str) -> str:
            res = runner.invoke(cli, list(args), catch_exceptions=False, prog_name="hpclaunch")
            assert res.exit_code == 0, res.output[-3000:]
            return res.output

        gpt2 = str(REPO / "recipes" / "gpt2")
        (root / "script").mkdir()
        (root / "script" / "boom.py").write_text(BOOM)  # a folder of its own: submit copies the script's folder
        # first: the local job's killed rank makes its node a suspect in this home, which a Slurm submission
        # would then exclude (hpclaunch/state/suspects.py does not say which cluster a node is of)
        cluster = _submitted(run("submit", str(root / "script" / "boom.py"), "--profile", "dev-slurm", "--layout",
                                 "2n1g", "--time", "00:05:00")) if slurm_available() else None
        mp.setenv("HPCLAUNCH_INJECT", "slow:1:2,kill:1:8")  # a straggler from step 2, a rank lost at step 8
        live = _submitted(run("submit", gpt2, "--profile", "local", "--preset", "tiny", "--layout", "1n2g",
                              "--set", f"train.max_steps={STEPS}", "--set", "train.log_every=1", "--set",
                              "train.save_every=5", "--set", "restarts.max=1"))
        mp.delenv("HPCLAUNCH_INJECT")
        failed = _submitted(run("submit", str(root / "script" / "boom.py"), "--profile", "local", "--layout", "1n2g"))
        sweep = _submitted(run("submit", gpt2, "--profile", "local", "--preset", "tiny", "--layout", "1n1g",
                               "--set", "train.max_steps=4", "--set", "train.log_every=1",
                               "--sweep", "train.lr=1e-4,1e-3", "--max-parallel", "2"))
        proc = subprocess.Popen([sys.executable, "-m", "hpclaunch.cli.main", "ui", "--interval", str(INTERVAL)],
                                env={**os.environ, **env}, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                                cwd=root)
        assert proc.stdout is not None
        said = proc.stdout.readline() + proc.stdout.readline()
        m = re.search(r"http://127\.0\.0\.1:(\d+)/\?token=([\w-]+)", said)
        assert m, said + (proc.stderr.read() if proc.poll() is not None else "")
        shots = REPO / "docs" / "ui" if os.environ.get("HPCLAUNCH_UI_SCREENSHOTS") == "1" else root / "shots"
        try:
            yield {"base": f"http://127.0.0.1:{m[1]}", "port": int(m[1]), "token": m[2], "live": live,
                   "failed": failed, "sweep": sweep, "cluster": cluster, "shots": shots, "root": root}
        finally:
            proc.send_signal(signal.SIGINT)  # Ctrl-C: a quiet end, exit 0
            proc.wait(timeout=30)
        assert proc.returncode == 0, proc.stderr.read() if proc.stderr else ""


@pytest.fixture(scope="module")
def browser():
    with Browser(width=1200, height=900, resolve={"rebind.test": "127.0.0.1", "other.test": "127.0.0.1"}) as b:
        yield b


@pytest.fixture(scope="module")
def tab(view, browser):
    """The tab of a person who opened the printed URL: the token once, a cookie since."""
    page = browser.page()
    page.goto(f"{view['base']}/?token={view['token']}")
    assert page.evaluate("location.href") == f"{view['base']}/"  # the token left the address bar
    assert page.evaluate("document.cookie") == ""  # HttpOnly: no script reads it
    return page


def curves(job: str) -> dict:
    from hpclaunch import api

    return api.encode.plain(api.curves(job))


def status_of(job: str) -> dict:
    from hpclaunch import api

    return api.status(job).to_json()


def test_a_running_jobs_page_grows_its_curves_and_timeline_without_a_reload(view, tab):
    url = f"{view['base']}/job/{view['live']}"
    tab.goto(url)
    start = time.monotonic()
    tab.wait_for("!!document.querySelector('svg.gantt rect.bar')", timeout=120)
    # its first points, then more while the page stays open (ui.js asks every INTERVAL seconds)
    first = int(tab.wait_for("Number(document.getElementById('chart-loss').dataset.points || 0) >= 3 && "
                             "Number(document.getElementById('chart-loss').dataset.points)", timeout=180))
    loads = tab.loads()
    tab.wait_for(f"Number(document.getElementById('chart-loss').dataset.points) > {first}", timeout=120)
    assert tab.loads() == loads, "the page was reloaded; the points should come by themselves"
    assert int(tab.evaluate("Number(document.body.dataset.updated)")) >= 1
    assert tab.query("svg.gantt rect.bar.running, svg.gantt rect.bar.training")  # the span still running
    tab.screenshot(view["shots"] / "ui-job-running.png", selector="main", max_height=1100)
    # it ends (a rank is killed at step 8 and relaunched inside the allocation, then it completes)
    tab.wait_for("document.body.dataset.finished === '1'", timeout=300)
    print(f"live job ended {time.monotonic() - start:.0f} s after its page was opened")


def test_a_finished_jobs_gantt_curves_and_ledger_are_its_records(view, tab):
    job = view["live"]
    tab.goto(f"{view['base']}/job/{job}")
    tab.wait_for("document.body.dataset.drawn === '1'")
    found = status_of(job)
    assert found["state"] == "COMPLETED", found["state"]
    restarts = found["timeline"]
    assert len(restarts) == 2 and len(found["recoveries"]) == 1
    # the Gantt chart: a bar per span of each restart, with the seconds the timeline says
    bars = tab.evaluate("[...document.querySelectorAll('svg.gantt rect.bar')].map(r => [r.dataset.span, "
                        "Number(r.dataset.restart), Number(r.dataset.seconds), r.getBoundingClientRect().width])")
    for entry in restarts:
        for span in ("launcher", "imports", "model_load", "data", "training"):
            (seconds,) = [s for name, r, s, _ in bars if name == span and r == entry["restart"]]
            assert seconds == pytest.approx(entry["durations"][span], abs=2e-3), (span, entry["restart"])
    assert all(width > 0 for *_, width in bars)  # each bar is drawn, however short
    assert [r for name, r, _, _ in bars if name == "recovery"] == [1]
    assert "queued" in [name for name, r, _, _ in bars if r == 0]
    widest = max(bars, key=lambda b: b[3])
    assert widest[0] in ("training", "launcher", "imports")
    saved = curves(job)["checkpoints"]
    ticks = tab.evaluate("[...document.querySelectorAll('svg.gantt rect.tick.checkpoint')].map(r => "
                         "Number(r.dataset.step))")
    assert ticks == [c["step"] for c in saved] and len(saved) >= 2
    assert tab.evaluate("document.querySelectorAll('svg.gantt rect.tick.fault').length") == 1
    # the loss curve: every step of the metrics, the same values
    c = curves(job)
    drawn = tab.evaluate("(() => { const c = window.hpclaunchCharts['chart-loss']; return [c.x, c.ys[0]]; })()")
    assert drawn[0] == c["steps"] and drawn[0][-1] == STEPS
    assert drawn[1] == pytest.approx(c["values"]["loss"])
    assert tab.evaluate("Number(document.getElementById('chart-throughput').dataset.points)") == len(c["steps"])
    assert tab.evaluate("document.querySelector('#chart-loss canvas').width") > 300  # uPlot drew it
    # the goodput ledger: the numbers of the run's ledger
    led = found["goodput"]
    assert tab.evaluate("document.querySelector('#goodput [data-goodput]').dataset.goodput") == str(led["goodput"])
    assert tab.evaluate("document.querySelector('#goodput .big').textContent") == f"{100 * led['goodput']:.1f} %"
    rows = tab.evaluate("Object.fromEntries([...document.querySelectorAll('#goodput table tbody tr')].map(tr => "
                        "[tr.cells[0].textContent, tr.cells[2].textContent]))")
    share = 100 * led["lost_s"]["startup"] / led["allocated_s"]
    trained = 100 * led["productive_s"] / led["allocated_s"]  # the row's share of the wall time (one node here)
    assert rows["start-up"] == f"{share:.1f} %" and rows["productive training"] == f"{trained:.1f} %"
    recovery = tab.evaluate("[...document.querySelectorAll('#recoveries tbody td')].map(td => td.textContent)")
    assert recovery[1:3] == ["killed", "1"]
    tab.screenshot(view["shots"] / "ui-job.png", selector="main", max_height=1900)


def wait_ended(job: str, timeout: float = 240) -> dict:
    from hpclaunch.schedulers.base import TERMINAL

    end = time.monotonic() + timeout
    while (found := status_of(job))["state"] not in TERMINAL:
        assert time.monotonic() < end, found["state"]
        time.sleep(1)
    return found


def test_a_failed_jobs_diagnosis_quotes_its_error(view, tab):
    wait_ended(view["failed"])
    tab.goto(f"{view['base']}/job/{view['failed']}")
    tab.wait_for("document.body.dataset.drawn === '1'")
    assert tab.evaluate("document.querySelector('.state').textContent") == "FAILED"
    quoted = tab.evaluate("document.querySelector('#diagnosis blockquote').textContent")
    assert quoted == "ValueError: loss is nan at step 3 (the test's own failure)"
    assert "rank 1" in tab.evaluate("document.querySelector('#diagnosis .cause').textContent")
    logs = tab.evaluate("document.querySelector('#logs pre').textContent")
    assert "[rank1] ValueError: loss is nan" in logs
    tab.goto(f"{view['base']}/job/{view['failed']}?rank=0#logs")
    assert "[rank1]" not in tab.evaluate("document.querySelector('#logs pre').textContent")
    tab.goto(f"{view['base']}/job/{view['failed']}")
    tab.screenshot(view["shots"] / "ui-diagnosis.png", selector="#diagnosis")


def test_a_sweeps_elements_side_by_side_and_their_losses_on_one_plot(view, tab):
    sweep = view["sweep"]
    wait_ended(sweep)  # every element
    tab.goto(f"{view['base']}/job/{sweep}")
    tab.wait_for("document.body.dataset.drawn === '1'")
    rows = tab.evaluate("[...document.querySelectorAll('#elements tbody tr')].map(tr => [tr.dataset.row, "
                        "tr.cells[1].textContent, tr.cells[2].textContent, tr.cells[5].textContent])")
    assert [r[1] for r in rows] == ["train.lr=1e-4", "train.lr=1e-3"] and {r[2] for r in rows} == {"COMPLETED"}
    for job_id, _, _, last in rows:
        assert float(last) == pytest.approx(curves(job_id)["values"]["loss"][-1], abs=1e-3)
    series = tab.evaluate("document.getElementById('chart-loss').dataset.series")
    assert series == "4,4"  # two elements, four steps each, on one plot
    tab.screenshot(view["shots"] / "ui-sweep.png", selector="main", max_height=1000)


def test_the_jobs_page_across_profiles(view, tab):
    tab.goto(f"{view['base']}/")
    rows = tab.evaluate("Object.fromEntries([...document.querySelectorAll('#jobs tbody tr')].map(tr => "
                        "[tr.dataset.row, [...tr.cells].map(td => td.textContent)]))")
    assert {view["live"], view["failed"], view["sweep"]} <= set(rows)
    live = rows[view["live"]]
    assert live[2] == "local" and live[5] == "COMPLETED" and f"{STEPS}/{STEPS}" in live[6]
    assert live[10] == f"{100 * status_of(view['live'])['goodput']['goodput']:.1f} %"
    assert rows[view["failed"]][5] == "FAILED"
    assert tab.evaluate(f"document.querySelector('tr[data-row=\"{view['live']}\"] svg.sparkline').dataset.points") \
        == str(STEPS)
    tab.screenshot(view["shots"] / "ui-jobs.png", selector="main", max_height=700)


def test_the_plan_of_a_recipe_on_a_profile(view, tab):
    tab.goto(f"{view['base']}/plan?recipe=gpt2&preset=tiny&profile=local&layout=1n2g")
    assert tab.evaluate("document.querySelector('#verdict .state').textContent") == "not checked"
    parts = tab.evaluate("[...document.querySelectorAll('svg.ledger-bar rect')].map(r => r.dataset.part)")
    assert "activations" in parts and "reserve" in parts
    assert "gpt2 (preset tiny) on local/local" in tab.evaluate("document.querySelector('pre').textContent")
    tab.screenshot(view["shots"] / "ui-plan.png", selector="main", max_height=700)


def test_without_javascript_the_pages_refresh_themselves(view, browser):
    page = browser.page(javascript=False)
    page.goto(f"{view['base']}/?token={view['token']}")
    loads = page.loads()
    time.sleep(3 * INTERVAL + 1)  # the jobs page refreshes itself every --interval seconds (its <noscript> meta)
    assert page.loads() > loads
    page.goto(f"{view['base']}/job/{view['live']}")
    assert page.query("noscript svg.sparkline")  # the loss as a small line
    assert page.query("svg.gantt rect.bar.training")  # the Gantt chart needs no script
    assert not page.query(".chart canvas")  # nothing drew the interactive curves


def test_the_guard_as_a_browser_meets_it(view, browser):
    job = f"{view['base']}/job/{view['live']}"
    stranger = browser.page(isolated=True)  # no cookie
    stranger.goto(job)
    assert stranger.responses(f"/job/{view['live']}") == [403]
    assert "no token" in stranger.evaluate("document.body.textContent")
    stranger.goto(f"{view['base']}/?token=not-the-token")
    assert "wrong token" in stranger.evaluate("document.body.textContent")
    # a name that points at 127.0.0.1 (DNS rebinding): refused, even with the right token
    stranger.goto(f"http://rebind.test:{view['port']}/?token={view['token']}")
    assert "127.0.0.1 or localhost" in stranger.evaluate("document.body.textContent")
    # a path outside the run root, as a browser sends it
    mine = browser.page()
    mine.goto(f"{view['base']}/?token={view['token']}")
    mine.goto(f"{view['base']}/job/..%2F..%2F..%2Fetc%2Fpasswd")
    assert "root:" not in mine.evaluate("document.body.textContent")
    assert mine.responses("etc%2Fpasswd")[-1] == 404


class _Evil(http.server.BaseHTTPRequestHandler):
    """Another site's page that asks the view for a job's page three ways (an image, a frame, a fetch)."""

    target = ""

    def do_GET(self) -> None:  # noqa: N802 - the standard library's name
        body = (f'<img src="{self.target}"><iframe src="{self.target}"></iframe>'
                f'<script>fetch("{self.target}", {{mode: "no-cors", credentials: "include"}})'
                f'.finally(() => document.title = "asked")</script>').encode()
        self.send_response(200)
        self.send_header("Content-Type", "text/html")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args: object) -> None:
        pass


def test_another_sites_page_cannot_read_the_view(view, tab):
    _Evil.target = f"{view['base']}/job/{view['live']}/live"
    evil = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _Evil)
    threading.Thread(target=evil.serve_forever, daemon=True).start()
    try:
        since = tab.mark()
        tab.goto(f"http://other.test:{evil.server_address[1]}/")  # the person's tab, with the view's cookie
        tab.wait_for("document.title === 'asked'")
        time.sleep(1)
        statuses = tab.responses(f"/job/{view['live']}/live", since)
        assert statuses and set(statuses) == {403}, statuses  # the image, the frame, the fetch: each refused
    finally:
        evil.shutdown()


@pytest.mark.slurm
@pytest.mark.skipif(not slurm_available(), reason="no Slurm cluster (scripts/dev-cluster.sh up)")
def test_a_dev_cluster_job_beside_the_local_ones(view, tab):
    job = view["cluster"]
    wait_ended(job, 300)
    tab.goto(f"{view['base']}/?profile=dev-slurm")
    rows = tab.evaluate("[...document.querySelectorAll('#jobs tbody tr')].map(tr => [tr.dataset.row, "
                        "tr.cells[2].textContent, tr.cells[5].textContent])")
    assert rows == [[job, "dev-slurm", "FAILED"]], rows
    tab.goto(f"{view['base']}/job/{job}")
    assert "ValueError: loss is nan at step 3" in tab.evaluate(
        "document.querySelector('#diagnosis blockquote').textContent")
    tab.goto(f"{view['base']}/avail?profile=dev-slurm")
    cells = tab.evaluate("[...document.querySelectorAll('#partitions tbody tr')].map(tr => tr.cells[1].textContent)")
    assert "debug" in cells
    tab.screenshot(view["shots"] / "ui-avail.png", selector="main", max_height=500)


def test_the_screenshots_are_small_pngs(view):
    shots = sorted(view["shots"].glob("*.png"))
    assert len(shots) >= 6, shots
    for shot in shots:
        data = shot.read_bytes()
        assert data[:8] == b"\x89PNG\r\n\x1a\n" and len(data) < 400_000, (shot, len(data))
    print(json.dumps({s.name: s.stat().st_size for s in shots}))
