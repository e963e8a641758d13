"""A small hub-compatible HTTP server on 127.0.0.1 for tests and benchmarks, with injectable faults.

It serves repos laid out on disk as ROOT/{models,datasets}/<org>--<name>/<files...> and answers the
requests huggingface_hub's ``snapshot_download``/``hf_hub_download`` make (see FACTS.md):

    GET  /api/{models|datasets}/{repo}/revision/{rev}          -> {"id", "sha", "siblings"}
    GET  /api/{models|datasets}/{repo}/tree/{rev}?recursive=1   -> [{"type","path","size","oid","lfs"}]
    HEAD/GET /[datasets/]{repo}/resolve/{rev}/{path}           (Range supported)

Files over LFS_THRESHOLD bytes are "LFS" files: the tree gives their sha256 and the HEAD answer an
``X-Linked-Etag``/``X-Linked-Size``. A missing repo answers 404 ``RepositoryNotFound``, a missing file
404 ``EntryNotFound``. Faults (``server.faults``), each counted down per request:

    drop:       {path: n}   send the headers and half the body, then close the connection
    error500:   {path|"api": n}  answer 500
    wrong_size: {path: n}   send a body shorter than the tree says (with a matching Content-Length)
    corrupt:    {path: n}   send the right size with flipped bytes
    slow:       {path: bytes_per_second}   throttle a file (to kill a download in the middle)

Run standalone: ``python -m tests.hubserver.server ROOT [--port P]`` prints the URL and serves.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import socket
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from urllib.parse import unquote, urlparse

LFS_THRESHOLD = 64 * 1024


def _file_ids(path: Path) -> dict:
    """size, git blob sha1, sha256 (cached in a side file: the 1 GiB benchmark file is hashed once)."""
    st = path.stat()
    side = path.parent / f".{path.name}.ids.json"
    try:
        cached = json.loads(side.read_text())
        if cached["size"] == st.st_size and cached["mtime_ns"] == st.st_mtime_ns:
            return cached
    except (OSError, ValueError, KeyError):
        pass
    sha, git = hashlib.sha256(), hashlib.sha1(f"blob {st.st_size}\0".encode())
    with open(path, "rb") as f:
        while chunk := f.read(8 << 20):
            sha.update(chunk)
            git.update(chunk)
    ids = {"size": st.st_size, "mtime_ns": st.st_mtime_ns, "sha256": sha.hexdigest(), "git": git.hexdigest()}
    try:
        side.write_text(json.dumps(ids))
    except OSError:
        pass
    return ids


class Repo:
    def __init__(self, folder: Path):
        self.folder = folder
        self._files: dict[str, dict] | None = None

    @property
    def files(self) -> dict[str, dict]:
        if self._files is None:
            files = {}
            for p in sorted(self.folder.rglob("*")):
                if p.is_file() and not p.name.startswith("."):
                    files[p.relative_to(self.folder).as_posix()] = _file_ids(p)
            self._files = files
        return self._files

    @property
    def sha(self) -> str:
        h = hashlib.sha1()
        for path, ids in self.files.items():
            h.update(f"{path}:{ids['git']}\n".encode())
        return h.hexdigest()


class HubServer:
    """``with HubServer(root) as hub: hub.url`` - a threaded server on a free port (loopback by default)."""

    def __init__(self, root: Path | str, port: int = 0, host: str = "127.0.0.1"):
        self.root = Path(root)
        self.faults: dict[str, dict] = {
            "drop": {},
            "error500": {},
            "wrong_size": {},
            "corrupt": {},
            "slow": {},
        }
        self.requests: list[tuple[str, str]] = []
        self._repos: dict[tuple[str, str], Repo] = {}
        self._lock = threading.Lock()
        server = self

        class Handler(_Handler):
            hub = server

        # host: 127.0.0.1, or the dev cluster's bridge address for a server that jobs on its nodes reach
        self.httpd = ThreadingHTTPServer((host, port), Handler)
        self.httpd.daemon_threads = True
        self.url = f"http://{host}:{self.httpd.server_address[1]}"
        self._thread: threading.Thread | None = None

    def repo(self, kind: str, repo_id: str) -> Repo | None:
        folder = self.root / f"{kind}s" / repo_id.replace("/", "--")
        if not folder.is_dir():
            return None
        with self._lock:
            return self._repos.setdefault((kind, repo_id), Repo(folder))

    def take_fault(self, name: str, key: str) -> bool:
        with self._lock:
            left = self.faults[name].get(key, 0)
            if left > 0:
                self.faults[name][key] = left - 1
                return True
        return False

    def count(self, method: str, needle: str) -> int:
        return sum(1 for m, p in self.requests if m == method and needle in p)

    def start(self) -> HubServer:
        self._thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()

    def __enter__(self) -> HubServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()


class _Handler(BaseHTTPRequestHandler):
    hub: HubServer
    protocol_version = "HTTP/1.1"

    def log_message(self, *args: object) -> None:
        pass

    def _json(self, data: object, status: int = 200, headers: dict | None = None) -> None:
        body = json.dumps(data).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        for k, v in (headers or {}).items():
            self.send_header(k, v)
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(body)

    def _error(self, status: int, code: str, message: str) -> None:
        self._json({"error": message}, status, {"X-Error-Code": code, "X-Error-Message": message})

    def do_HEAD(self) -> None:
        self.do_GET()

    def do_GET(self) -> None:
        path = unquote(urlparse(self.path).path)
        self.hub.requests.append((self.command, path))
        try:
            if path.startswith("/api/"):
                self._api(path[len("/api/") :])
            elif "/resolve/" in path:
                self._resolve(path.lstrip("/"))
            else:
                self._error(404, "RepoNotFound", "Not found")
        except (BrokenPipeError, ConnectionResetError):
            pass

    def _api(self, rest: str) -> None:
        if self.hub.take_fault("error500", "api"):
            return self._error(500, "ServerError", "injected 500")
        kind_s, _, rest = rest.partition("/")
        kind = {"models": "model", "datasets": "dataset"}.get(kind_s)
        for verb in ("/revision/", "/tree/"):
            if verb in rest:
                repo_id, _, rev = rest.partition(verb)
                break
        else:
            return self._error(404, "RepoNotFound", "Not found")
        repo = self.hub.repo(kind, repo_id) if kind else None
        if repo is None:
            return self._error(404, "RepoNotFound", f"Repository {repo_id} not found")
        if rev not in ("main", repo.sha):
            return self._error(404, "RevisionNotFound", f"Revision {rev} not found")
        if verb == "/revision/":
            return self._json(
                {
                    "id": repo_id,
                    "sha": repo.sha,
                    "private": False,
                    "siblings": [{"rfilename": p} for p in repo.files],
                }
            )
        tree, dirs = [], set()
        for p, ids in repo.files.items():
            parts = p.split("/")
            for i in range(1, len(parts)):
                d = "/".join(parts[:i])
                if d not in dirs:
                    dirs.add(d)
                    tree.append({"type": "directory", "path": d, "oid": hashlib.sha1(d.encode()).hexdigest()})
            entry = {"type": "file", "path": p, "size": ids["size"], "oid": ids["git"]}
            if ids["size"] > LFS_THRESHOLD:
                entry["lfs"] = {"oid": ids["sha256"], "size": ids["size"], "pointerSize": 134}
            tree.append(entry)
        return self._json(tree)

    def _resolve(self, rest: str) -> None:
        kind = "model"
        if rest.startswith("datasets/"):
            kind, rest = "dataset", rest[len("datasets/") :]
        repo_id, _, tail = rest.partition("/resolve/")
        rev, _, fpath = tail.partition("/")
        repo = self.hub.repo(kind, repo_id)
        if repo is None:
            return self._error(404, "RepoNotFound", f"Repository {repo_id} not found")
        if rev not in ("main", repo.sha):
            return self._error(404, "RevisionNotFound", f"Revision {rev} not found")
        ids = repo.files.get(fpath)
        if ids is None:
            return self._error(404, "EntryNotFound", f"{fpath} does not exist on {rev}")
        if self.hub.take_fault("error500", fpath):
            return self._error(500, "ServerError", "injected 500")
        size = ids["size"]
        lfs = size > LFS_THRESHOLD
        etag = ids["sha256"] if lfs else ids["git"]
        headers = {
            "X-Repo-Commit": repo.sha,
            "ETag": f'"{etag}"',
            "Accept-Ranges": "bytes",
            "Content-Type": "application/octet-stream",
        }
        if lfs:
            headers.update({"X-Linked-Etag": f'"{etag}"', "X-Linked-Size": str(size)})
        if self.command == "HEAD":
            self.send_response(200)
            for k, v in headers.items():
                self.send_header(k, v)
            self.send_header("Content-Length", str(size))
            self.end_headers()
            return None
        start = 0
        rng = self.headers.get("Range")
        if rng and rng.startswith("bytes="):
            start = int(rng[len("bytes=") :].split("-")[0] or 0)
        length = size - start
        if self.hub.take_fault("wrong_size", fpath):
            length = max(0, length // 2)
        drop = self.hub.take_fault("drop", fpath)
        corrupt = self.hub.take_fault("corrupt", fpath)
        self.send_response(206 if start else 200)
        for k, v in headers.items():
            self.send_header(k, v)
        if start:
            self.send_header("Content-Range", f"bytes {start}-{size - 1}/{size}")
        self.send_header("Content-Length", str(length))
        self.end_headers()
        rate = self.hub.faults["slow"].get(fpath)
        with open(repo.folder / fpath, "rb") as f:
            f.seek(start)
            if drop:
                self.wfile.write(f.read(length // 2))
                self.wfile.flush()
                self.connection.shutdown(socket.SHUT_RDWR)
                self.close_connection = True
                return None
            if corrupt:
                data = bytearray(f.read(length))
                for i in range(0, len(data), 4096):
                    data[i] ^= 0xFF
                self.wfile.write(bytes(data))
                return None
            if rate:
                sent = 0
                while sent < length:
                    chunk = f.read(min(65536, length - sent))
                    if not chunk:
                        break
                    self.wfile.write(chunk)
                    sent += len(chunk)
                    time.sleep(len(chunk) / rate)
                return None
            self.wfile.flush()
            if length:
                self.connection.sendfile(f, offset=start, count=length)
        return None


def copy_repo(src: Path, root: Path, kind: str, repo_id: str) -> Path:
    dst = root / f"{kind}s" / repo_id.replace("/", "--")
    shutil.copytree(src, dst, dirs_exist_ok=True)
    return dst


def main(argv: list[str]) -> int:
    import argparse

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("root")
    ap.add_argument("--port", type=int, default=0)
    args = ap.parse_args(argv)
    hub = HubServer(args.root, args.port)
    print(hub.url, flush=True)
    try:
        hub.httpd.serve_forever()
    except KeyboardInterrupt:
        pass
    return 0


if __name__ == "__main__":
    os.environ.setdefault("PYTHONUNBUFFERED", "1")
    sys.exit(main(sys.argv[1:]))
