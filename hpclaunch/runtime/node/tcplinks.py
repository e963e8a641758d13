"""The health check's links over plain TCP, in ceil(log2 N) rounds, for a job whose ranks talk TCP (gloo on CPU).

The pairing is linkcheck's (hpclaunch/runtime/train/linkcheck.py, which a job on devices runs through its
collective library): in round k node i meets node i XOR 2^k, the lower one sending a buffer and reading it back.
gloo's transport is TCP between the nodes' addresses, so on CPU the same links are measured here with the standard
library, without importing torch (~1-4 s of CPU per node before step 0). Each node listens on the health check's
port + its index (nodes that share an address, as on a dev cluster, never collide); its partners are found by name
in the allocation's node list (HPCLAUNCH_ALLOCATION, the health step's node order). A partner that cannot be reached
within the timeout is recorded and the rounds go on. Standard library only.
"""

from __future__ import annotations

import socket
import statistics
import threading
import time
from typing import Any

CHUNK = 1 << 20


def partners(node: int, nodes: int) -> list[tuple[int, int]]:
    """(round, partner) of `node` among `nodes`: round k pairs it with node XOR 2^k, where that is a node. Every
    node of two or more has at least one partner (clearing its highest bit gives a smaller node; node 0 meets 1)."""
    rounds = max(1, (nodes - 1).bit_length())
    return [(k, node ^ (1 << k)) for k in range(rounds) if node ^ (1 << k) < nodes]


def _send_all(sock: socket.socket, size: int, buf: bytes) -> None:
    left = size
    while left:
        sock.sendall(buf[:min(left, len(buf))])
        left -= min(left, len(buf))


def _recv_all(sock: socket.socket, size: int) -> None:
    left = size
    while left:
        got = sock.recv(min(left, CHUNK))
        if not got:
            raise ConnectionError("the partner closed the connection")
        left -= len(got)


def _exchange(sock: socket.socket, size: int, buf: bytes, first: bool) -> None:
    if first:
        _send_all(sock, size, buf)
        _recv_all(sock, size)
    else:
        _recv_all(sock, size)
        _send_all(sock, size, buf)


def _connect(host: str, port: int, deadline: float) -> socket.socket:
    """Connect to a partner's listener, retrying until it listens or `deadline`."""
    while True:
        try:
            return socket.create_connection((host, port), timeout=max(0.1, deadline - time.monotonic()))
        except OSError:
            if time.monotonic() >= deadline:
                raise
            time.sleep(0.05)


#: Node K listens on the health check's port + K % NODE_PORTS: nodes that share an address (a dev cluster whose
#: nodes share the host's network, one machine running several) never bind the same port; NODE_PORTS keeps the
#: highest below Linux's ephemeral range (32768) with the base port under 30000 (health.py).
NODE_PORTS = 2048


def _address(entry: str, port: int, node: int) -> tuple[str, int]:
    """Node `node`'s address: `host` (listening on `port` + its offset) or `host:port` (given)."""
    host, _, own = entry.partition(":")
    return host, int(own) if own else port + node % NODE_PORTS


def measure(node: int, hosts: list[str], port: int, size: int, iters: int, timeout: float) -> dict[str, Any]:
    """This node's links to its partners (`hosts`: every node's address, in node order, each `host` or
    `host:port`)."""
    nodes = len(hosts)
    mine = partners(node, nodes)
    # the higher node of each pair listens; it accepts its lower partners, one connection per round
    lower = {p for _, p in mine if p < node}
    accepted: dict[int, socket.socket] = {}
    server = socket.create_server(("", _address(hosts[node], port, node)[1]), backlog=max(8, len(lower)))
    server.settimeout(timeout * (len(mine) + 1))

    def accept() -> None:  # the server listens already: a partner may connect before this thread runs
        try:
            while len(accepted) < len(lower):
                conn, _ = server.accept()
                conn.settimeout(timeout)
                who = int.from_bytes(_recv_exact(conn, 4), "big")
                accepted[who] = conn
        except OSError:
            pass

    listener = threading.Thread(target=accept, daemon=True)
    listener.start()
    buf = b"\0" * min(size, CHUNK)
    pairs: list[dict[str, Any]] = []
    start = time.monotonic()
    for k, partner in mine:
        first = node < partner
        # a partner held up by partners that never came in its earlier rounds arrives up to k timeouts late
        late = timeout * (k + 1)
        deadline = start + late
        try:
            if first:
                sock = _connect(*_address(hosts[partner], port, partner), deadline)
                sock.settimeout(timeout)
                sock.sendall(node.to_bytes(4, "big"))
            else:
                while partner not in accepted and time.monotonic() < deadline and listener.is_alive():
                    time.sleep(0.01)
                if partner not in accepted:
                    raise TimeoutError(f"node {partner} did not connect in {timeout:g} s")
                sock = accepted[partner]
            with sock:
                seconds = _timed(sock, size, buf, first, iters, deadline, timeout)
        except OSError as exc:  # refused, reset, timed out
            pairs.append({"round": k, "partner": partner, "error": f"{type(exc).__name__}: {exc}"[:200]})
            continue
        pairs.append({"round": k, "partner": partner, "seconds": round(seconds, 6),
                      "gbps": round(2 * size / seconds / 1e9, 4)})
    server.close()
    answered = [float(p["gbps"]) for p in pairs if "gbps" in p]
    return {"backend": "tcp", "nodes": nodes, "rounds": max(1, (nodes - 1).bit_length()), "bytes": size,
            "pairs": pairs, "busbw_gbps": round(statistics.median(answered), 4) if answered else None,
            "failed_partners": [p["partner"] for p in pairs if "error" in p]}


def _timed(sock: socket.socket, size: int, buf: bytes, first: bool, iters: int, deadline: float,
           timeout: float) -> float:
    """The median seconds of `iters` exchanges after the handshake (both ends in this round, by `deadline`) and a
    warm-up."""
    sock.settimeout(max(0.1, deadline - time.monotonic()))
    _exchange(sock, 1, b"\0", first)
    sock.settimeout(timeout)
    _exchange(sock, size, buf, first)
    times = []
    for _ in range(iters):
        t0 = time.perf_counter()
        _exchange(sock, size, buf, first)
        times.append(time.perf_counter() - t0)
    return statistics.median(times)


def _recv_exact(sock: socket.socket, size: int) -> bytes:
    data = b""
    while len(data) < size:
        got = sock.recv(size - len(data))
        if not got:
            raise ConnectionError("closed")
        data += got
    return data
