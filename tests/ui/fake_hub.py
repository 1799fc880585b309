"""A stand-in for the Hugging Face Hub on 127.0.0.1, enough for huggingface_hub's snapshot_download: a repo's
revision info (its commit and file list), each file's metadata (HEAD: commit, ETag, size) and its bytes (GET),
sent in small pieces with a pause so a test can watch the progress and cancel in the middle. An unknown repo
answers as the Hub does (404, RepoNotFound), a gated one 401 GatedRepo. Nothing leaves the machine.
"""

from __future__ import annotations

import hashlib
import json
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import unquote, urlsplit

COMMIT = "0123456789abcdef0123456789abcdef01234567"


class FakeHub:
    """``repos``: {repo id: {file name: bytes}}; ``gated``: repo ids that need accepted terms."""

    def __init__(self, repos: dict[str, dict[str, bytes]], gated=(), piece: int = 16384, pause: float = 0.0):
        self.repos = repos
        self.gated = set(gated)
        self.piece = piece
        self.pause = pause
        self.sent: dict[str, int] = {}  # file name -> bytes sent so far
        self.finished: set[str] = set()  # files sent whole
        self.requests: list[str] = []
        hub = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args):
                pass

            def do_HEAD(self):  # noqa: N802
                hub._answer(self, body=False)

            def do_GET(self):  # noqa: N802
                hub._answer(self, body=True)

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        self._thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    def __enter__(self):
        self._thread.start()
        return self

    def __exit__(self, *exc):
        self.server.shutdown()
        self.server.server_close()

    def _error(self, h, status: int, code: str) -> None:
        h.send_response(status)
        h.send_header("X-Error-Code", code)
        h.send_header("Content-Type", "application/json")
        body = json.dumps({"error": code}).encode()
        h.send_header("Content-Length", str(len(body)))
        h.end_headers()
        if h.command != "HEAD":
            h.wfile.write(body)

    def _answer(self, h, body: bool) -> None:
        path = unquote(urlsplit(h.path).path)
        self.requests.append(f"{h.command} {path}")
        parts = path.strip("/").split("/")
        if parts[:2] == ["api", "models"] and len(parts) >= 4:  # /api/models/ORG/NAME[/revision/REV]
            repo = "/".join(parts[2:4])
            if repo not in self.repos:
                return self._error(h, 404, "RepoNotFound")
            if repo in self.gated:
                return self._error(h, 401, "GatedRepo")
            if parts[4:5] == ["tree"]:  # /api/models/ORG/NAME/tree/REV: the file list with sizes
                tree = [{"type": "file", "path": n, "size": len(d), "oid": hashlib.sha1(d).hexdigest()}
                        for n, d in self.repos[repo].items()]
                return self._send(h, json.dumps(tree).encode(), body, "application/json")
            info = json.dumps({"id": repo, "sha": COMMIT, "siblings": [{"rfilename": n} for n in self.repos[repo]]})
            return self._send(h, info.encode(), body, "application/json")
        if len(parts) >= 5 and parts[2] == "resolve":  # /ORG/NAME/resolve/REV/FILE
            repo, name = "/".join(parts[:2]), "/".join(parts[4:])
            if repo not in self.repos or name not in self.repos[repo]:
                return self._error(h, 404, "EntryNotFound")
            data = self.repos[repo][name]
            return self._send(h, data, body, "application/octet-stream", name,
                              {"X-Repo-Commit": COMMIT, "ETag": f'"{hashlib.sha256(data).hexdigest()}"'})
        return self._error(h, 404, "RepoNotFound")

    def _send(self, h, data: bytes, body: bool, kind: str, name: str | None = None, extra=None) -> None:
        h.send_response(200)
        h.send_header("Content-Type", kind)
        h.send_header("Content-Length", str(len(data)))
        for k, v in (extra or {}).items():
            h.send_header(k, v)
        h.end_headers()
        if not body:
            return
        try:
            for i in range(0, len(data), self.piece):
                h.wfile.write(data[i:i + self.piece])
                h.wfile.flush()
                if name is not None:
                    self.sent[name] = self.sent.get(name, 0) + len(data[i:i + self.piece])
                    if self.pause:
                        time.sleep(self.pause)
        except (BrokenPipeError, ConnectionResetError):  # the client went away: a cancelled download
            return
        if name is not None:
            self.finished.add(name)


def use_fake_hub(monkeypatch, hub: FakeHub, chunk: int = 16384) -> None:
    """Point huggingface_hub at ``hub`` (its endpoint is read when the library is imported) and read the
    downloads in ``chunk``-byte pieces, so each piece reaches the progress bars."""
    from huggingface_hub import constants

    monkeypatch.setattr(constants, "ENDPOINT", hub.url)
    monkeypatch.setattr(constants, "HUGGINGFACE_CO_URL_TEMPLATE", hub.url + "/{repo_id}/resolve/{revision}/{filename}")
    monkeypatch.setattr(constants, "DOWNLOAD_CHUNK_SIZE", chunk)
    monkeypatch.setattr(constants, "HF_HUB_OFFLINE", False)
    monkeypatch.setattr(constants, "HF_HUB_DISABLE_XET", True, raising=False)
    monkeypatch.delenv("HF_TOKEN", raising=False)
