"""URL jobs cannot reach what the server can: off by default; when on, only http(s) to public addresses, checked
at every redirect, through one fetcher whose failures all read the same. Real HTTP servers on loopback play the
internal services; a resolver the test controls plays DNS."""

from __future__ import annotations

import http.server
import ipaddress
import socket
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("fastapi", reason="needs the server extra: pip install 'm3agent[server]'")
import httpx

from m3agent.errors import DownloadError
from m3agent.server.app import create_app
from m3agent.server.fetch import FetchPolicy, download, is_public
from m3agent.settings import load_settings
from server_helpers import live_server

BODY = b"RIFF-not-really-media" * 100


class Recorder(http.server.BaseHTTPRequestHandler):
    """Answers ``/file.wav`` with :data:`BODY`, ``/to?u=URL`` with a redirect; records every request."""

    seen: list[tuple[str, str]]

    def do_GET(self) -> None:
        self.seen.append((self.path, self.headers.get("host", "")))
        if self.path.startswith("/to?u="):
            self.send_response(302)
            self.send_header("Location", self.path.removeprefix("/to?u="))
            self.end_headers()
            return
        self.send_response(200)
        self.send_header("Content-Length", str(len(BODY)))
        self.end_headers()
        self.wfile.write(BODY)

    def log_message(self, *args: Any) -> None:
        pass


@contextmanager
def recorder() -> Iterator[tuple[int, list[tuple[str, str]]]]:
    seen: list[tuple[str, str]] = []
    handler = type("Handler", (Recorder,), {"seen": seen})
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        yield server.server_address[1], seen
    finally:
        server.shutdown()


def served(tmp_path: Path, **server: Any) -> Any:
    settings = load_settings(memory=str(tmp_path / "memory.db"), embedder="hash", llm="none", server=server)
    return live_server(create_app(settings, mcp=False))


def finished(client: httpx.Client, job_id: str, timeout: float = 60) -> dict[str, Any]:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        job: dict[str, Any] = client.get(f"/api/jobs/{job_id}").json()
        if job["state"] not in ("queued", "running"):
            return job
        time.sleep(0.05)
    raise AssertionError(f"job {job_id} still running")


def test_url_jobs_are_off_by_default(tmp_path: Path) -> None:
    with recorder() as (port, seen), served(tmp_path) as url, httpx.Client(base_url=url) as client:
        refused = client.post("/api/jobs", json={"url": f"http://127.0.0.1:{port}/file.wav"})
        assert refused.status_code == 403 and "allow_urls" in refused.json()["hint"]
        time.sleep(0.3)
        assert seen == []


def test_internal_addresses_are_never_contacted_and_every_failure_reads_the_same(tmp_path: Path) -> None:
    with recorder() as (port, seen), served(tmp_path, allow_urls=True) as url, \
            httpx.Client(base_url=url) as client:
        closed = socket.socket()
        closed.bind(("127.0.0.1", 0))  # bound, never listening: a connection would be refused
        targets = [f"http://127.0.0.1:{port}/file.wav", f"http://localhost:{port}/file.wav",
                   f"http://[::ffff:127.0.0.1]:{port}/file.wav", f"{url}/api/videos",
                   f"http://127.0.0.1:{closed.getsockname()[1]}/x.mp4", "http://169.254.169.254/latest/meta-data/",
                   "http://10.255.255.1:81/x.mp4", "http://0.0.0.0:80/x.mp4"]
        jobs = [client.post("/api/jobs", json={"url": target}) for target in targets]
        assert [j.status_code for j in jobs] == [202] * len(targets)
        ends = [finished(client, j.json()["id"]) for j in jobs]
        closed.close()
        assert {e["state"] for e in ends} == {"failed"}
        assert {(e["error"].replace(e["source"], "URL"), e["hint"]) for e in ends} == {
            ("could not download URL", ends[0]["hint"])}  # refused, closed, unreachable: one answer
        assert seen == []
        assert client.get("/api/videos").json()["total"] == 0


def test_only_http_and_https_are_accepted_and_nothing_listens(tmp_path: Path) -> None:
    probe = socket.socket()
    probe.bind(("127.0.0.1", 0))
    port = probe.getsockname()[1]
    probe.close()
    with served(tmp_path, allow_urls=True) as url, httpx.Client(base_url=url) as client:
        for target in (f"tcp://127.0.0.1:{port}?listen=1", "rtsp://127.0.0.1/x", "file:///etc/passwd",
                       "concat:/etc/passwd", f"udp://127.0.0.1:{port}"):
            assert client.post("/api/jobs", json={"url": target}).status_code == 400, target
        time.sleep(0.5)
        with pytest.raises(OSError):
            socket.create_connection(("127.0.0.1", port), timeout=1).close()


@pytest.mark.parametrize(("address", "public"), [
    ("93.184.216.34", True), ("2606:2800:220:1:248:1893:25c8:1946", True),
    ("127.0.0.1", False), ("10.1.2.3", False), ("172.16.0.1", False), ("192.168.1.1", False),
    ("169.254.169.254", False), ("100.64.0.1", False), ("0.0.0.0", False), ("224.0.0.1", False),
    ("255.255.255.255", False), ("240.0.0.1", False), ("::1", False), ("::", False), ("fe80::1", False),
    ("fc00::1", False), ("ff02::1", False), ("::ffff:127.0.0.1", False), ("::ffff:169.254.169.254", False),
    ("2002:7f00:1::1", False), ("64:ff9b::a9fe:a9fe", False), ("64:ff9b::5db8:d822", True),
])
def test_the_address_policy(address: str, public: bool) -> None:
    assert is_public(ipaddress.ip_address(address)) is public


def policy(names: dict[str, list[str]], allowed: str = "127.0.0.1/32") -> FetchPolicy:
    def resolver(host: str, port: int) -> list[str]:
        return names.get(host, [host])  # an address resolves to itself, as with getaddrinfo

    return FetchPolicy(max_bytes=1 << 20, timeout_s=5, allowed_networks=(ipaddress.ip_network(allowed),),
                       resolver=resolver)


def test_every_redirect_is_checked_and_the_vetted_address_is_the_one_connected(tmp_path: Path) -> None:
    with recorder() as (port, seen):
        names = {"media.example": ["127.0.0.1"], "internal.example": ["10.0.0.5"],
                 "rebound.example": ["127.0.0.1", "192.168.0.7"]}
        target = tmp_path / "got.wav"
        download(f"http://media.example:{port}/to?u=/file.wav", target, policy(names))
        assert target.read_bytes() == BODY
        assert seen == [("/to?u=/file.wav", f"media.example:{port}"), ("/file.wav", f"media.example:{port}")]
        for hop in ("http://internal.example/x.mp4", "http://169.254.169.254/latest/", "http://[::1]/x",
                    f"http://rebound.example:{port}/file.wav", "file:///etc/passwd", f"ftp://media.example:{port}/"):
            seen.clear()
            with pytest.raises(DownloadError) as refused:
                download(f"http://media.example:{port}/to?u={hop}", tmp_path / "no.wav", policy(names))
            assert refused.value.message == f"could not download http://media.example:{port}/to?u={hop}"
            assert seen == [(f"/to?u={hop}", f"media.example:{port}")]  # the redirect only, never its target
        assert not (tmp_path / "no.wav").exists() and not (tmp_path / "no.wav.part").exists()


def test_an_allowed_network_is_downloaded_within_the_size_limit(tmp_path: Path) -> None:
    with recorder() as (port, _):
        names = {"media.example": ["127.0.0.1"]}
        small = FetchPolicy(max_bytes=100, allowed_networks=(ipaddress.ip_network("127.0.0.0/8"),),
                            resolver=lambda host, port: names[host])
        with pytest.raises(DownloadError):
            download(f"http://media.example:{port}/file.wav", tmp_path / "big.wav", small)
        assert list(tmp_path.iterdir()) == []
        with pytest.raises(DownloadError):  # loopback is not public: refused without the allowed network
            download(f"http://media.example:{port}/file.wav", tmp_path / "x.wav",
                     FetchPolicy(max_bytes=1 << 20, resolver=lambda host, port: names[host]))


def test_a_trickling_download_ends_at_its_deadline(tmp_path: Path) -> None:
    from hostile_http import hostile_server, trickled_body

    with hostile_server() as server:
        server.behaviours.append(trickled_body(0.05, size=10_000))
        slow = FetchPolicy(max_bytes=1 << 20, timeout_s=5, deadline_s=1.0,
                           allowed_networks=(ipaddress.ip_network("127.0.0.1/32"),))
        started = time.monotonic()
        with pytest.raises(DownloadError):
            download(f"http://127.0.0.1:{server.port}/x.mp4", tmp_path / "x.mp4", slow)
        assert time.monotonic() - started < 3
        assert list(tmp_path.iterdir()) == []


def test_cancelling_a_url_job_stops_its_download_and_deletes_it(tmp_path: Path) -> None:
    from hostile_http import hostile_server, trickled_body

    with hostile_server() as files, served(tmp_path, allow_urls=True, url_allowed_networks=["127.0.0.1/32"]) as url, \
            httpx.Client(base_url=url) as client:
        files.behaviours.append(trickled_body(0.05, size=10_000))
        job = client.post("/api/jobs", json={"url": f"http://127.0.0.1:{files.port}/x.mp4"}).json()
        deadline = time.monotonic() + 10
        while not files.bytes_sent and time.monotonic() < deadline:
            time.sleep(0.05)
        assert client.post(f"/api/jobs/{job['id']}/cancel").status_code == 200
        assert finished(client, job["id"], timeout=5)["state"] == "cancelled"
        assert list((tmp_path / "memory-server" / "uploads").iterdir()) == []
