"""The node records' way to the run directory in a multi-node launch: over TCP to node 0, which writes one file.

A shared filesystem's load in steady training is its metadata calls, and they grew with the nodes: every node's
supervisor published its record in three calls every publishing interval, and node 0's read every node's record
for its slow-node judge at the same rate (docs/scale.md). So in a launch of two nodes or more:

- node 0's supervisor runs a ``Collector``: it listens on the records port (``address``), keeps every node's last
  record in memory (its slow-node judge reads them there) and writes them all in node 0's own record,
  RUN_DIR/progress/node-0.restart-<N>.json, under ``"nodes"``: one file for the job, three calls per publishing
  interval whatever N;
- every other node's supervisor sends its record there (``Sender``, one connection kept open, a line of JSON each
  and an answer; its first record waits up to START_PATIENCE for node 0 to listen); a record that is not answered
  (node 0 gone, no link, another process on the port) goes to the node's own file,
  RUN_DIR/progress/node-<K>.restart-<N>.json, as in a one-node launch; after a silent node 0 (no answer within
  TIMEOUT: a try held the supervisor's loop) its ordinary records go there for the next RETRY_AFTER s, while a
  refused connection (node 0 not listening yet, or gone with its host up) is tried again at the next record. Readers
  take each node's newest record of the two (``at``; hpclaunch.state.runfiles.RunFiles.node_record_data);
- records that must reach the run directory (told to stop, ended: ``urgent``) are answered only once node 0 has
  written them; a node that gets no answer within URGENT_TIMEOUT writes its own file. Node 0 waits up to LINGER
  seconds at its end for the other nodes' ends, so that a launch that ends together leaves one file.

The records port is 61000 + a hash of the job and restart modulo 4000 (above Linux's ephemeral range, away from
the launch's MASTER_PORT and the health check's ports, 20000-32047), or HPCLAUNCH_RECORDS_PORT. A node answers only
a hello that names its job and restart, so a stray process on the port is never taken for node 0. Standard
library only.
"""

from __future__ import annotations

import json
import selectors
import socket
import threading
import time
import zlib
from collections.abc import Callable, Mapping

PORT_ENV = "HPCLAUNCH_RECORDS_PORT"
PORT_BASE, PORT_SPAN = 61000, 4000
TIMEOUT = 2.0  # seconds to connect to node 0 and for its answer to a record
START_PATIENCE = 3.0  # seconds a node's first record waits for node 0 to listen (they start together)
URGENT_TIMEOUT = 5.0  # seconds for node 0 to answer that it wrote a record told to stop or ended
URGENT_GAP = 0.3  # seconds node 0 gathers urgent records before it writes them (an ending launch: few writes)
LINGER = 2.0  # seconds node 0 waits at its end for the other nodes' ends
RETRY_AFTER = 60.0  # seconds a node writes its own file before it tries node 0 again, after node 0 was silent
MAX_LINE = 8 << 20  # bytes: a longer line is no node record; its connection is closed

Record = dict[str, object]


def address(env: Mapping[str, str]) -> tuple[str, int] | None:
    """Node 0's records address (its IPv4 address, the records port) for a launch of two nodes or more; None for one
    node or outside a job (no head node)."""
    head = env.get("HPCLAUNCH_HEAD_NODE", "")
    if int(env.get("HPCLAUNCH_NNODES", "1") or 1) < 2 or not head:
        return None
    try:
        head = socket.gethostbyname(head)
    except OSError:
        pass  # connecting will fail, and each node writes its own record
    key = f"{env.get('HPCLAUNCH_JOB_ID', '')}.{env.get('HPCLAUNCH_RESTART', '0')}.records".encode()
    return head, int(env.get(PORT_ENV) or PORT_BASE + zlib.crc32(key) % PORT_SPAN)


def _hello(job: str, restart: int) -> dict[str, object]:
    return {"hello": "hpclaunch-records", "job": job, "restart": restart}


def _line(data: object) -> bytes:
    return json.dumps(data, separators=(",", ":")).encode() + b"\n"


class Sender:
    """Node K's end: its records to node 0, each answered, or False (the caller writes its own file)."""

    def __init__(self, addr: tuple[str, int], job: str, restart: int, node: str, *, timeout: float = TIMEOUT,
                 urgent_timeout: float = URGENT_TIMEOUT, retry_after: float = RETRY_AFTER) -> None:
        self.addr, self.node, self.hello = addr, node, _hello(job, restart)
        self.timeout, self.urgent_timeout, self.retry_after = timeout, urgent_timeout, retry_after
        # after node 0 did not answer (gone, or its host silent: each try would hold the supervisor's loop for
        # up to `timeout`), ordinary records go to the node's own file until then; urgent ones still try
        self._quiet_until = 0.0
        self._sock: socket.socket | None = None
        self._buf = b""
        self._busy = False  # a send in progress (a signal handler's publish falls back to the file)

    def send(self, record: Record, urgent: bool = False, patience: float = 0.0) -> bool:
        """True once node 0 answered: it holds the record (urgent: it wrote it). With `patience`, a refused connection
        is tried again until then (at the start: node 0's supervisor may not listen yet)."""
        if self._busy or (not urgent and time.monotonic() < self._quiet_until):
            return False
        self._busy = True
        try:
            for _ in range(2):  # a connection node 0 closed since the last record is made again, once
                fresh, began = self._sock is None, time.monotonic()
                try:
                    if fresh:
                        self._connect(time.monotonic() + patience)
                    self._ask(_line({"node": self.node, "record": record, "urgent": urgent}),
                              self.urgent_timeout if urgent else self.timeout)
                    return True
                except (OSError, ValueError):
                    self.close()
                    if fresh:
                        if time.monotonic() - began >= self.timeout / 2:  # it held the loop: node 0 is silent
                            self._quiet_until = time.monotonic() + self.retry_after
                        return False
            return False
        finally:
            self._busy = False

    def _connect(self, deadline: float) -> None:
        while True:
            try:
                self._sock = socket.create_connection(self.addr, timeout=self.timeout)
                break
            except ConnectionRefusedError:
                if time.monotonic() >= deadline:
                    raise
                time.sleep(0.05)
        self._buf = b""
        if self._ask(_line(self.hello), self.timeout) != {"ok": True}:
            raise ValueError("not this job's node 0")

    def _ask(self, data: bytes, timeout: float) -> object:
        """Send one line and read the answer's line."""
        sock = self._sock
        assert sock is not None
        sock.settimeout(timeout)
        sock.sendall(data)
        while b"\n" not in self._buf:
            got = sock.recv(65536)
            if not got:
                raise ConnectionError("node 0 closed the connection")
            self._buf += got
        answer, self._buf = self._buf.split(b"\n", 1)
        return json.loads(answer)

    def close(self) -> None:
        if self._sock is not None:
            self._sock.close()
            self._sock = None


class Collector:
    """Node 0's end: every node's last record in memory, written through `write` (node 0's record with the others
    under "nodes"), a listener thread for the other nodes."""

    def __init__(self, port: int, job: str, restart: int, write: Callable[[dict[str, Record]], bool], *,
                 nodes: int = 0, urgent_gap: float = URGENT_GAP) -> None:
        self.hello, self.write, self.nodes, self.urgent_gap = _hello(job, restart), write, nodes, urgent_gap
        self.records: dict[str, Record] = {}  # node -> its last record (node 0's own included)
        self.changed = False  # a record came in since the last write
        self.lock = threading.RLock()  # the records and the write (node 0's main thread writes too)
        self._ended = threading.Condition(self.lock)
        self._stop = False
        self._wake_r, self._wake_w = socket.socketpair()
        self.server: socket.socket | None
        try:
            self.server = socket.create_server(("", port), backlog=1024)  # every node may connect at once
        except OSError:  # the port is taken: every node writes its own record
            self.server = None
        self._thread = threading.Thread(target=self._serve, name="hpclaunch-records", daemon=True)
        if self.server is not None:
            self._thread.start()

    @property
    def listening(self) -> bool:
        return self.server is not None

    @property
    def port(self) -> int | None:
        return self.server.getsockname()[1] if self.server is not None else None

    def put(self, node: str, record: Record) -> None:
        with self.lock:
            if self.records.get(node) != record:
                self.records[node] = record
                self.changed = True
                self._ended.notify_all()

    def flush(self) -> bool:
        """Write every record now; False when the write failed."""
        with self.lock:
            ok = self.write(dict(self.records))
            if ok:
                self.changed = False
            return ok

    def snapshot(self) -> dict[str, Record]:
        with self.lock:
            return dict(self.records)

    def wait_ends(self, timeout: float) -> bool:
        """Wait (at most `timeout`) until every other node of the launch has recorded its end; True if they did."""
        end = time.monotonic() + timeout

        def all_ended() -> bool:
            others = [r for n, r in self.records.items() if n != "0"]
            return len(others) >= self.nodes - 1 and all("ended" in r for r in others)

        with self._ended:
            return self._ended.wait_for(all_ended, max(0.0, end - time.monotonic()))

    def close(self) -> None:
        """Stop listening (connections still open are closed: their nodes write their own records)."""
        self._stop = True
        self._wake_w.send(b"x")
        if self._thread.is_alive():
            self._thread.join(timeout=5)
        for sock in (self.server, self._wake_r, self._wake_w):
            if sock is not None:
                sock.close()

    # --- the listener thread
    def _serve(self) -> None:
        assert self.server is not None
        sel = selectors.DefaultSelector()
        self.server.setblocking(False)
        sel.register(self.server, selectors.EVENT_READ, None)
        sel.register(self._wake_r, selectors.EVENT_READ, None)
        state: dict[socket.socket, list] = {}  # connection -> [buffer, greeted]
        pending: list[socket.socket] = []  # connections whose urgent record waits for the write
        first_pending = 0.0
        while not self._stop:
            wait = max(0.0, first_pending + self.urgent_gap - time.monotonic()) if pending else None
            for key, _ in sel.select(wait):
                sock = key.fileobj
                if sock is self.server:
                    self._accept(sel, state)
                elif sock is not self._wake_r:
                    assert isinstance(sock, socket.socket)
                    if self._read(sock, state, pending) is False:
                        self._drop(sel, state, sock, pending)
            if pending and not first_pending:
                first_pending = time.monotonic()
            if pending and time.monotonic() >= first_pending + self.urgent_gap:
                self._write_pending(sel, state, pending)
                first_pending = 0.0
        if pending:  # ends that came in before the stop: written and answered, not left to their nodes' files
            self._write_pending(sel, state, pending)
        for sock in list(state):
            sock.close()
        sel.close()

    def _write_pending(self, sel: selectors.BaseSelector, state: dict[socket.socket, list],
                       pending: list[socket.socket]) -> None:
        """Write the records now and answer the nodes whose urgent record waited for it."""
        answer = _line({"ok": True}) if self.flush() else None
        for sock in pending:
            if answer is None or not _answer(sock, answer):
                self._drop(sel, state, sock, [])  # not written: the node writes its own record
        pending.clear()

    def _accept(self, sel: selectors.BaseSelector, state: dict[socket.socket, list]) -> None:
        assert self.server is not None
        try:
            conn, _ = self.server.accept()
        except OSError:
            return
        conn.setblocking(True)
        conn.settimeout(TIMEOUT)  # answers are short; a peer that does not read them is dropped
        state[conn] = [b"", False]
        sel.register(conn, selectors.EVENT_READ, None)

    def _read(self, sock: socket.socket, state: dict[socket.socket, list], pending: list[socket.socket]) -> bool:
        """Take the lines that came in on `sock`; False when it is to be closed."""
        try:
            got = sock.recv(1 << 20)
        except OSError:
            return False
        if not got:
            return False
        entry = state[sock]
        entry[0] += got
        if len(entry[0]) > MAX_LINE:
            return False
        while b"\n" in entry[0]:
            line, entry[0] = entry[0].split(b"\n", 1)
            try:
                msg = json.loads(line)
            except ValueError:
                return False
            if not entry[1]:  # the hello: this job and restart, else no answer
                if msg != self.hello or not _answer(sock, _line({"ok": True})):
                    return False
                entry[1] = True
                continue
            node, record = msg.get("node") if isinstance(msg, dict) else None, msg.get("record")
            if not isinstance(node, str) or node == "0" or not isinstance(record, dict):
                return False
            self.put(node, record)
            if msg.get("urgent"):
                pending.append(sock)
            elif not _answer(sock, _line({"ok": True})):
                return False
        return True

    def _drop(self, sel: selectors.BaseSelector, state: dict[socket.socket, list], sock: socket.socket,
              pending: list[socket.socket]) -> None:
        if sock in state:
            sel.unregister(sock)
            del state[sock]
        while sock in pending:
            pending.remove(sock)
        sock.close()


def _answer(sock: socket.socket, data: bytes) -> bool:
    try:
        sock.sendall(data)
        return True
    except OSError:
        return False

