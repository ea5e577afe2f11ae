"""A local HTTP server (127.0.0.1, port 0) for the fetching tests: no other host is ever reached."""

from __future__ import annotations

import http.server
import re
import socket
import threading
from collections.abc import Iterator
from dataclasses import dataclass, field

import pytest


@dataclass
class Site:
    """What the server serves and what it was asked."""

    files: dict[str, bytes] = field(default_factory=dict)
    drop: set[str] = field(default_factory=set)  # paths whose first answer stops half-way
    ranges: bool = True  # False: answer 200 (the whole file) to a Range request
    requests: list[tuple[str, str | None]] = field(default_factory=list)
    url: str = ""


def _handler(site: Site) -> type[http.server.BaseHTTPRequestHandler]:
    class Handler(http.server.BaseHTTPRequestHandler):
        def log_message(self, *args: object) -> None:
            pass

        def do_GET(self) -> None:  # noqa: N802 - the http.server API
            site.requests.append((self.path, self.headers.get("Range")))
            assert len(site.requests) < 20, "too many requests"
            body = site.files.get(self.path)
            if body is None:
                self.send_error(404, "Not Found")
                return
            start = 0
            match = re.fullmatch(r"bytes=(\d+)-", self.headers.get("Range") or "")
            if match and site.ranges:
                start = int(match.group(1))
                self.send_response(206)
                self.send_header("Content-Range", f"bytes {start}-{len(body) - 1}/{len(body)}")
            else:
                self.send_response(200)
            self.send_header("Content-Length", str(len(body) - start))
            self.end_headers()
            if self.path in site.drop:
                site.drop.discard(self.path)
                self.wfile.write(body[start:start + (len(body) - start) // 2])
                self.wfile.flush()
                self.close_connection = True
                self.connection.shutdown(socket.SHUT_RDWR)
                return
            self.wfile.write(body[start:])

    return Handler


@pytest.fixture
def site(monkeypatch: pytest.MonkeyPatch) -> Iterator[Site]:
    monkeypatch.setenv("no_proxy", "127.0.0.1,localhost")
    monkeypatch.setenv("NO_PROXY", "127.0.0.1,localhost")
    served = Site()
    httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _handler(served))
    thread = threading.Thread(target=httpd.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
    thread.start()
    served.url = f"http://127.0.0.1:{httpd.server_address[1]}"
    try:
        yield served
    finally:
        httpd.shutdown()
        httpd.server_close()
