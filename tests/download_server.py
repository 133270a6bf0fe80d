"""A local HTTP server on 127.0.0.1 (random port, a thread) for the download tests: serves
byte strings under paths, honours `Range: bytes=N-`, and plays faults a real server or network
does: a connection dropped mid-file, an error status, a stall, a slow trickle."""

from __future__ import annotations

import http.server
import threading
import time
from dataclasses import dataclass, field


@dataclass
class Served:
    """One path's bytes and faults. `drop_after`: close the connection after so many bytes
    of the body, on the first `drops` requests; `status`: answer with it instead; `stall_s`:
    send half the body, then wait; `trickle_s`: pause after every chunk."""

    data: bytes
    drop_after: int | None = None
    drops: int = 1
    status: int | None = None
    stall_s: float = 0.0
    trickle_s: float = 0.0
    chunk: int = 1024


@dataclass
class ServerState:
    files: dict[str, Served] = field(default_factory=dict)
    requests: list[tuple[str, str | None]] = field(default_factory=list)  # (path, Range)
    stop: threading.Event = field(default_factory=threading.Event)


class _Handler(http.server.BaseHTTPRequestHandler):
    state: ServerState

    def log_message(self, *args) -> None:  # quiet
        pass

    def do_GET(self) -> None:  # noqa: N802 (http.server's name)
        state = self.state
        state.requests.append((self.path, self.headers.get("Range")))
        served = state.files.get(self.path)
        if served is None:
            self.send_error(404, "Not Found")
            return
        if served.status is not None:
            self.send_error(served.status)
            return
        start = 0
        ranged = self.headers.get("Range", "")
        if ranged.startswith("bytes=") and ranged.endswith("-"):
            start = int(ranged[6:-1])
            if start >= len(served.data):
                self.send_response(416)
                self.send_header("Content-Range", f"bytes */{len(served.data)}")
                self.send_header("Content-Length", "0")
                self.end_headers()
                return
            self.send_response(206)
            self.send_header(
                "Content-Range", f"bytes {start}-{len(served.data) - 1}/{len(served.data)}"
            )
        else:
            self.send_response(200)
        body = served.data[start:]
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        limit = len(body)
        if served.drop_after is not None and served.drops > 0:
            served.drops -= 1
            limit = min(limit, served.drop_after)
        if served.stall_s:
            limit = len(body) // 2
        sent = 0
        try:
            while sent < limit and not state.stop.is_set():
                piece = body[sent : min(sent + served.chunk, limit)]
                self.wfile.write(piece)
                self.wfile.flush()
                sent += len(piece)
                if served.trickle_s:
                    time.sleep(served.trickle_s)
            if served.stall_s:
                state.stop.wait(served.stall_s)
        except (BrokenPipeError, ConnectionResetError):
            pass
        self.close_connection = True


class LocalServer:
    """`with LocalServer() as server:` serves `server.state.files` at `server.url(path)`."""

    def __init__(self):
        self.state = ServerState()
        handler = type("Handler", (_Handler,), {"state": self.state})
        self.httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
        self.httpd.daemon_threads = True
        self.thread = threading.Thread(target=self.httpd.serve_forever, args=(0.05,), daemon=True)

    def url(self, path: str) -> str:
        return f"http://127.0.0.1:{self.httpd.server_address[1]}{path}"

    def __enter__(self) -> LocalServer:
        self.thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self.state.stop.set()
        self.httpd.shutdown()
        self.httpd.server_close()
