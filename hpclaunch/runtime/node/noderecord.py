"""The node record: how a node reports to the shared run directory in steady training.

Shared filesystems fail on many small writes from many clients, not on bytes. So while a job trains, nothing on
a node writes the run directory but its supervisor (hpclaunch/runtime/node/supervise.py, one per node whatever
the launcher: torchrun's agent, the agent-less launch, msrun), and its record is

    RUN_DIR/progress/node-<K>.restart-<N>.json
        {"node", "host", "restart", "started", "at" (when published), "writes" (this one included), "files",
         "ranks": {"<R>": {"rank", "step", "phase", "t", "host", "pid", "win", "sf"}, ...},
         "signalled" (told to stop), "ended" and "code" (at the end),
         "nodes": {"<K>": node K's record, ...} (node 0's, in a multi-node launch)}

published when its ranks' records changed, at most every PUBLISH_INTERVAL s, and at once when the node starts,
when it is told to stop and when its launch ends. A file is written whole and renamed into place (open, write,
rename: three calls on the shared filesystem; its folder made once). In a launch of two nodes or more only node 0
writes one: the other nodes send their records to node 0's supervisor over TCP, and it writes them all in its own
file under ``"nodes"`` (hpclaunch/runtime/node/recordlink.py); a node that node 0 does not answer writes its own
file, and readers take each node's newest record (``at``). ``writes`` counts a node's publishes, ``files`` the
writes of its own file.

The ranks leave their own records (hpclaunch/runtime/node/progress.py) in node-local memory: a folder under
/dev/shm (else the node's temporary folder) named by user, job, node, restart and supervisor, passed to every
process the supervisor starts in HPCLAUNCH_NODE_STATE and removed when the launch ends (folders a killed
supervisor left are removed by the next one on the node). A rank killed by SIGKILL leaves its last record there,
and the supervisor still publishes it. Ranks other than 0 write their metrics lines there as well; the
supervisor appends them to RUN_DIR/metrics/rank-<R>.jsonl every HISTORY_INTERVAL s and at the end (rank 0 writes
its own file, which status and watch follow).

In steady state the job thus writes one record file per PUBLISH_INTERVAL (node 0's), and each node one append per
rank of its metrics and one of its usage samples (hpclaunch/runtime/node/sampler.py) per HISTORY_INTERVAL: a number
per node, not per rank. Node 0's slow-node judge reads the records in memory. Readers (status, watch, stragglers
and stalls, goodput, blame, diagnose, the watchdogs of nodes whose ranks stopped) read node 0's file and any node's
own: hpclaunch.state.runfiles.RunFiles.progress_records and node_record_data. Standard library only.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import socket
import tempfile
import time
from pathlib import Path

from hpclaunch.runtime.node import recordlink
from hpclaunch.state.runfiles import (
    ENV_NODE_STATE,
    RunFiles,
    append_once,
    newest_per_node,
    progress_record,
    ranks_of,
)

PUBLISH_INTERVAL = 15.0  # seconds between two writes of a node record (when its ranks' records changed)
HISTORY_INTERVAL = 600.0  # seconds between appends of the ranks' metrics lines (ranks > 0) and the usage samples
_RANK = re.compile(r"^rank-(\d+)\.json$")
_METRICS = re.compile(r"^metrics-rank-(\d+)\.jsonl$")
_UNSAFE = re.compile(r"[^A-Za-z0-9_-]")

Record = dict[str, object]


def from_env() -> Path | None:
    """This process's node-local folder, where its supervisor reads its records; None without a supervisor."""
    folder = os.environ.get(ENV_NODE_STATE)
    return Path(folder) if folder else None


def rank_file(folder: Path, rank: int) -> Path:
    return folder / f"rank-{rank}.json"


def metrics_file(folder: Path, rank: int) -> Path:
    return folder / f"metrics-rank-{rank}.jsonl"


def read_ranks(folder: Path) -> dict[int, Record]:
    """The ranks' records in a node-local folder: rank -> record (a record being written the first time is left
    out)."""
    try:
        names = os.listdir(folder)
    except OSError:
        return {}
    out: dict[int, Record] = {}
    for name in names:
        if _RANK.match(name) and (rec := progress_record(folder / name)) is not None:
            out[int(str(rec["rank"]))] = rec
    return out


def _local_base() -> Path:
    """Node-local memory where there is some (/dev/shm), else the node's temporary folder (TMPDIR)."""
    shm = Path("/dev/shm")
    base = shm if shm.is_dir() and os.access(shm, os.W_OK) else Path(tempfile.gettempdir())
    return base / f"hpclaunch-{os.getuid()}"


def _sweep(base: Path) -> None:
    """Remove the folders of supervisors that are gone (killed before they could remove their own)."""
    try:
        entries = list(base.iterdir())
    except OSError:
        return
    for folder in entries:
        pid = folder.name.rsplit(".", 1)[-1]
        if pid.isdigit() and int(pid) != os.getpid() and not Path(f"/proc/{pid}").exists():
            shutil.rmtree(folder, ignore_errors=True)


_MADE: set[Path] = set()  # folders of the run directory this process made or found already


def _made(folder: Path) -> None:
    """`folder` exists: made once per process (a mkdir and a stat on the shared filesystem), not at every write."""
    if folder not in _MADE:
        folder.mkdir(parents=True, exist_ok=True)
        _MADE.add(folder)


def write_replace(path: Path, data: bytes) -> None:
    """`path` holds `data`, replaced whole: three calls on the shared filesystem (open, write, rename; Python's
    open() would add a stat of the file)."""
    tmp = path.with_name(path.name + ".tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    try:
        os.write(fd, data)
    finally:
        os.close(fd)
    os.replace(tmp, path)


class NodeWriter:
    """A node's record and the node-local folder its ranks report into. In a launch of two nodes or more (`link`:
    node 0's records address, hpclaunch/runtime/node/recordlink.py) node 0 collects every node's record and writes
    them in its own file; the other nodes send theirs there, and write their own file only when node 0 does not
    answer."""

    def __init__(self, run: RunFiles, node: str, restart: int, job: str, *,
                 publish_interval: float = PUBLISH_INTERVAL, history_interval: float = HISTORY_INTERVAL,
                 link: tuple[str, int] | None = None, nodes: int = 1, linger: float = recordlink.LINGER,
                 patience: float = recordlink.START_PATIENCE) -> None:
        self.run, self.path, self.restart = run, run.node_record(node, restart), restart
        self.publish_interval, self.history_interval, self.linger = publish_interval, history_interval, linger
        now = time.time()
        self.record: Record = {"node": node, "host": socket.gethostname(), "restart": restart,
                               "started": round(now, 3)}
        base = _local_base()
        _sweep(base)
        self.folder = base / f"{_UNSAFE.sub('_', job)}.node{_UNSAFE.sub('_', node)}.restart{restart}.{os.getpid()}"
        self.folder.mkdir(parents=True, exist_ok=True)
        self.writes = 0  # records published (sent to node 0 or written)
        self.files = 0  # writes of this node's own file (node 0: the job's records): the shared filesystem's load
        self.collector: recordlink.Collector | None = None
        self.sender: recordlink.Sender | None = None
        if link is not None and node == "0":
            collector = recordlink.Collector(link[1], job, restart, self._write_all, nodes=nodes)
            if collector.listening:
                self.collector = collector
            else:
                collector.close()
        elif link is not None:
            self.sender = recordlink.Sender(link, job, restart, node)
        self._published: dict[int, Record] | None = None
        self._next_publish, self._next_history = 0.0, now + history_interval
        self._copied: dict[str, int] = {}  # metrics file name -> bytes appended to the run directory so far
        self.publish(now, patience=patience)

    @property
    def env(self) -> dict[str, str]:
        """What the processes of the launch need to find the folder."""
        return {ENV_NODE_STATE: str(self.folder)}

    def ranks(self) -> dict[int, Record]:
        return read_ranks(self.folder)

    def job_ranks(self, *, files: bool) -> dict[int, Record]:
        """Every rank's last record in the job. Node 0 of a multi-node launch has them in memory (with `files`,
        merged with the records of nodes that could not reach it, from the run directory); elsewhere they are read
        from the run directory."""
        if self.collector is None:
            return self.run.progress_records(self.restart)
        held = list(self.collector.snapshot().values())
        found = self.run.node_record_data(self.restart) if files else []
        return ranks_of(newest_per_node([*found, *held]).values())

    def tick(self, now: float, ranks: dict[int, Record] | None = None) -> None:
        """Called every poll: publish the ranks' records if they changed (on node 0: or another node's record came
        in) and the interval has passed, or at once when a rank appeared (once per rank: a node lost in its first
        seconds still says which ranks it ran, for blame); append the metrics lines every HISTORY_INTERVAL."""
        ranks = self.ranks() if ranks is None else ranks
        news = ranks != self._published or (self.collector is not None and self.collector.changed)
        if news and (now >= self._next_publish or ranks.keys() - (self._published or {}).keys()):
            self.publish(now, ranks)
        if now >= self._next_history:
            self._next_history = now + self.history_interval
            self.copy_metrics()

    def publish(self, now: float, ranks: dict[int, Record] | None = None, patience: float = 0.0,
                **fields: object) -> None:
        """Publish the record now, with `fields` added to it for good (signalled, ended, code: these reach the run
        directory before this returns, through node 0 or in this node's own file); `patience`: recordlink.Sender."""
        self.record.update(fields)
        ranks = self.ranks() if ranks is None else ranks
        data = {**self.record, "at": round(now, 3), "writes": self.writes + 1, "files": self.files,
                "ranks": {str(r): rec for r, rec in sorted(ranks.items())}}
        self._published, self._next_publish = ranks, now + self.publish_interval
        if self.collector is not None:
            self.collector.put("0", data)
            self.collector.flush()
        elif self.sender is None or not self.sender.send(data, urgent=bool(fields), patience=patience):
            self._write_all({"": data})
        self.writes += 1

    def _write_all(self, records: dict[str, Record]) -> bool:
        """This node's file: its own record, and on node 0 the other nodes' under "nodes", without the ranks' windows
        for the slow-node judge (``hw``, 3/4 of a rank's record: node 0 judges from memory). False if not written."""
        if self.collector is not None:
            records = {n: _without_windows(r) for n, r in records.items()}
        mine = next((r for n, r in records.items() if n in ("", "0")), {})
        others = {n: r for n, r in sorted(records.items()) if n not in ("", "0")}
        data = {**mine, "files": self.files + 1, **({"nodes": others} if others else {})}
        try:
            _made(self.path.parent)
            write_replace(self.path, json.dumps(data).encode())
            self.files += 1
            return True
        except OSError:
            return False  # a record not written leaves status and blame with less evidence, never stops the job

    def copy_metrics(self) -> None:
        """Append the ranks' new metrics lines (whole lines only) to their files in the run directory."""
        try:
            names = sorted(n for n in os.listdir(self.folder) if _METRICS.match(n))
        except OSError:
            return
        for name in names:
            done = self._copied.get(name, 0)
            try:
                with open(self.folder / name, "rb") as f:
                    f.seek(done)
                    new = f.read()
                new = new[:new.rfind(b"\n") + 1]
                if not new:
                    continue
                rank = int(_METRICS.match(name).group(1))  # type: ignore[union-attr]  # listed by the pattern
                target = self.run.metrics_file(rank)
                _made(target.parent)
                append_once(target, new)
                self._copied[name] = done + len(new)
            except OSError:
                continue

    def close(self, code: int) -> None:
        """The launch ended: the last metrics lines and records (a rank killed by SIGKILL included), then the
        node-local folder is removed."""
        self.copy_metrics()
        now = time.time()
        self.publish(now, ended=round(now, 3), code=code)
        if self.collector is not None:  # the other nodes' ends, when they come within `linger`, in the same file
            self.collector.wait_ends(self.linger)
            self.collector.close()
            if self.collector.changed:
                self.collector.flush()
        if self.sender is not None:
            self.sender.close()
        shutil.rmtree(self.folder, ignore_errors=True)


def _without_windows(record: Record) -> Record:
    ranks = record.get("ranks")
    if not isinstance(ranks, dict):
        return record
    return {**record, "ranks": {r: {k: v for k, v in rec.items() if k != "hw"} if isinstance(rec, dict) else rec
                                for r, rec in ranks.items()}}
