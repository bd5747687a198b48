"""URL jobs download their file through one checked fetcher; ffmpeg then reads only the local copy.

Every hop (the URL, then each redirect) must be ``http`` or ``https``; its host is
resolved once and every address it resolves to must be public: not loopback,
private, link-local, shared, multicast, reserved or unspecified, nor an IPv6 form
of one (IPv4-mapped, 6to4, NAT64), unless it lies in ``server.url_allowed_networks``.
The connection goes to the vetted address itself, never to the name again (DNS
rebinding cannot swap it), with TLS checked against the host name. Every failure
of a download reads the same :class:`~m3agent.errors.DownloadError`, so a client
learns nothing about which addresses or ports the server can reach; the log keeps
the reason.
"""

from __future__ import annotations

import http.client
import ipaddress
import logging
import os
import socket
import ssl
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING
from urllib.parse import urljoin, urlsplit

from m3agent.errors import DownloadError

if TYPE_CHECKING:
    from m3agent.settings import ServerSettings

log = logging.getLogger(__name__)

SCHEMES = ("http", "https")
MAX_REDIRECTS = 5
REDIRECTS = (301, 302, 303, 307, 308)
CHUNK = 1 << 16
NAT64 = ipaddress.IPv6Network("64:ff9b::/96")

IPAddress = ipaddress.IPv4Address | ipaddress.IPv6Address
IPNetwork = ipaddress.IPv4Network | ipaddress.IPv6Network
Resolver = Callable[[str, int], list[str]]


def resolve(host: str, port: int) -> list[str]:
    """Every address ``host`` resolves to (IPv4 and IPv6), in the resolver's order."""
    infos = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)
    return list(dict.fromkeys(str(info[4][0]) for info in infos))


@dataclass(frozen=True, slots=True)
class FetchPolicy:
    """What a download may reach and how long and large it may be."""

    max_bytes: int
    timeout_s: float = 30.0
    deadline_s: float = 3600.0
    allowed_networks: tuple[IPNetwork, ...] = ()
    resolver: Resolver = field(default=resolve)

    @classmethod
    def of(cls, server: ServerSettings) -> FetchPolicy:
        """The policy of the server settings (the size limit is the upload limit)."""
        return cls(max_bytes=int(server.max_upload_mb * (1 << 20)), timeout_s=server.url_timeout_s,
                   deadline_s=server.url_download_s, allowed_networks=tuple(server.url_allowed_networks))


class Refused(Exception):
    """Why a download failed (logged; the client sees only the uniform :class:`DownloadError`)."""


def is_public(address: IPAddress) -> bool:
    """Whether ``address`` is a public unicast address, looking inside IPv6 forms that carry an IPv4 one."""
    if isinstance(address, ipaddress.IPv6Address):
        inner = address.ipv4_mapped or address.sixtofour or (
            ipaddress.IPv4Address(int(address) & 0xFFFFFFFF) if address in NAT64 else None)
        if inner is not None:
            return is_public(inner)
    return address.is_global and not (address.is_multicast or address.is_reserved or address.is_link_local
                                      or address.is_loopback or address.is_unspecified or address.is_private)


def vetted(host: str, port: int, policy: FetchPolicy) -> list[str]:
    """The addresses of ``host`` to connect to; :class:`Refused` unless every one of them may be reached."""
    try:
        addresses = [ipaddress.ip_address(a.split("%", 1)[0]) for a in policy.resolver(host, port)]
    except (OSError, UnicodeError, ValueError) as exc:
        raise Refused(f"cannot resolve {host}: {exc}") from None
    if not addresses:
        raise Refused(f"{host} has no address")
    for address in addresses:
        if not (is_public(address) or any(address in net for net in policy.allowed_networks)):
            raise Refused(f"{host} resolves to {address}, which is not a public address")
    return [str(a) for a in addresses]


def download(url: str, target: Path, policy: FetchPolicy, *, keep_going: Callable[[], bool] = lambda: True) -> None:
    """Download ``url`` into ``target``, following checked redirects; :class:`DownloadError` on any failure.

    ``keep_going`` is asked between chunks; when it turns false the download stops with a ``DownloadError``
    too (the caller knows why)."""
    try:
        _download(url, target, policy, keep_going)
    except (Refused, OSError, http.client.HTTPException, ssl.SSLError) as exc:
        log.warning("download of %s refused or failed: %s", url, exc)
        raise DownloadError(f"could not download {url}") from None


def _download(url: str, target: Path, policy: FetchPolicy, keep_going: Callable[[], bool]) -> None:
    started = time.monotonic()
    for _ in range(MAX_REDIRECTS + 1):
        connection = _connect(url, policy)
        try:
            parts = urlsplit(url)
            path = (parts.path or "/") + (f"?{parts.query}" if parts.query else "")
            connection.request("GET", path, headers={"User-Agent": "m3agent", "Accept-Encoding": "identity"})
            response = connection.getresponse()
            if response.status in REDIRECTS:
                location = response.getheader("location")
                if not location:
                    raise Refused(f"redirect {response.status} without a Location")
                url = urljoin(url, location)
                continue
            if response.status != 200:
                raise Refused(f"answered HTTP {response.status}")
            _save(response, target, policy, started, keep_going)
            return
        finally:
            connection.close()
    raise Refused(f"more than {MAX_REDIRECTS} redirects")


def _connect(url: str, policy: FetchPolicy) -> http.client.HTTPConnection:
    """A connection to a vetted address of ``url``'s host (the first that answers)."""
    parts = urlsplit(url)
    scheme, host = parts.scheme.lower(), parts.hostname
    if scheme not in SCHEMES or not host:
        raise Refused(f"{scheme or 'no'} scheme or no host")
    try:
        port = parts.port or (443 if scheme == "https" else 80)
    except ValueError as exc:
        raise Refused(str(exc)) from None
    tls = ssl.create_default_context() if scheme == "https" else None
    failures: list[str] = []
    for address in vetted(host, port, policy):
        connection = PinnedConnection(host, port, address, policy.timeout_s, tls)
        try:
            connection.connect()
            return connection
        except OSError as exc:
            connection.close()
            failures.append(f"{address}: {exc}")
    raise Refused(f"no address of {host} answered ({'; '.join(failures)})")


def _save(response: http.client.HTTPResponse, target: Path, policy: FetchPolicy, started: float,
          keep_going: Callable[[], bool]) -> None:
    """Write the body to ``target`` (through a ``.part`` file), within the size and time limits."""
    declared = response.getheader("content-length")
    if declared is not None and declared.isdigit() and int(declared) > policy.max_bytes:
        raise Refused(f"declares {declared} bytes, over the limit of {policy.max_bytes}")
    part = target.with_name(target.name + ".part")
    written = 0
    try:
        with part.open("wb") as out:
            while chunk := response.read1(CHUNK):  # one socket read at a time: a trickle meets the deadline
                written += len(chunk)
                if written > policy.max_bytes:
                    raise Refused(f"sent more than {policy.max_bytes} bytes")
                if time.monotonic() - started > policy.deadline_s:
                    raise Refused(f"took longer than {policy.deadline_s:g} s")
                if not keep_going():
                    raise Refused("stopped")
                out.write(chunk)
        os.replace(part, target)
    finally:
        part.unlink(missing_ok=True)


class PinnedConnection(http.client.HTTPConnection):
    """An HTTP(S) connection to one vetted address; the Host header and TLS name stay the URL's host."""

    def __init__(self, host: str, port: int, address: str, timeout: float, tls: ssl.SSLContext | None) -> None:
        super().__init__(host, port, timeout=timeout)
        self.address = address
        self.tls = tls
        if tls is not None:
            self.default_port = 443

    def connect(self) -> None:
        """Connect to the vetted address (never resolving the host again), then TLS when the URL is https."""
        sock = socket.create_connection((self.address, self.port), self.timeout)
        self.sock = sock if self.tls is None else self.tls.wrap_socket(sock, server_hostname=self.host)

