"""proofgate's egress broker: the only way out of a check's setup phase (SPEC §2 `egress`).

Its size (~800 lines) is honest: the broker is copied into a container as one file and
runs without proofgate, so its decision, proxy, DNS refuser and log must live together.

One self-contained file, standard library only, for any python3 >= 3.8: proofgate copies
it into a broker container started from the check's own image (trusted like the
configuration) and runs it there; it never imports proofgate. The same file holds the
pure decision (`decide`) that proofgate's configuration loader and the unit tests use.

The broker is an HTTP proxy: `CONNECT host:port` (HTTPS and any TLS tunnel) and plain
HTTP with an absolute URI (`GET http://host/path`). For every attempt it

1. normalises the host (lower case, one trailing dot dropped, IPv6 brackets removed) and
   checks its syntax;
2. requires an exact `host:port` match with the allowlist (an IP literal only when that
   literal is listed; no wildcards);
3. resolves the name itself and refuses when ANY address is not public: private,
   loopback, link-local, multicast, unspecified, reserved, shared (100.64/10), an IPv4
   address embedded in IPv6 (mapped, 6to4, Teredo, NAT64) that is one of those, or a
   known cloud metadata address; known metadata and internal names are refused before
   any lookup;
4. connects only to the addresses it checked (no second lookup: DNS rebinding cannot
   swap the address between check and use);
5. writes one JSON line per attempt to its log: kind, host, port, decision, reason,
   address, bytes each way, duration.

A refusal is answered `403` with a reason phrase and a body naming the host:port and
why, so pip, curl and friends print it in the command's log. It also answers DNS on
port 53 (the clean room's only resolver points at it) with REFUSED for every query, and
logs the query name: names leave through nothing, and exfiltration attempts are recorded.

Test-only: the configuration may carry `unsafe_allow_nets` (CIDRs whose addresses are
not refused as private) and `unsafe_hosts` (a name -> addresses map used instead of DNS).
proofgate fills them only from its own process environment, never from a repository's
configuration; metadata and loopback addresses stay refused even then.
"""

from __future__ import annotations

import ipaddress
import json
import os
import re
import signal
import socket
import struct
import sys
import threading
import time
from collections.abc import Sequence
from typing import NamedTuple, Union

IPAddress = Union[ipaddress.IPv4Address, ipaddress.IPv6Address]  # noqa: UP007 — python3.8
IPNetwork = Union[ipaddress.IPv4Network, ipaddress.IPv6Network]  # noqa: UP007

# Known cloud metadata endpoints. 168.63.129.16 (Azure's wire server) is a public
# address, so the private-address rule alone would not refuse it.
METADATA_ADDRESSES = frozenset(
    ipaddress.ip_address(a)
    for a in (
        "169.254.169.254",  # AWS, Azure, GCP, OpenStack, DigitalOcean, Oracle, ...
        "169.254.169.253",  # AWS DNS
        "169.254.170.2",  # AWS ECS task metadata
        "169.254.169.123",  # AWS time sync
        "168.63.129.16",  # Azure wire server
        "100.100.100.200",  # Alibaba Cloud
        "192.0.0.192",  # Oracle Cloud
        "fd00:ec2::254",  # AWS IMDS over IPv6
        "fd00:ec2::23",  # AWS DNS over IPv6
    )
)
METADATA_NAMES = frozenset(
    {
        "metadata",
        "metadata.google.internal",
        "metadata.goog",
        "metadata.azure.com",
        "instance-data",
        "instance-data.ec2.internal",
        "localhost",
    }
)
# Suffixes of names that only mean something inside a provider's or the host's network.
INTERNAL_SUFFIXES = (".internal", ".localhost", ".local", ".localdomain", ".home.arpa")
_SHARED = ipaddress.ip_network("100.64.0.0/10")
_NAT64 = (ipaddress.ip_network("64:ff9b::/96"), ipaddress.ip_network("64:ff9b:1::/48"))
_LABEL = re.compile(r"^(?!-)[a-z0-9_-]{1,63}(?<!-)$")
_NUMERIC_LABEL = re.compile(r"^(?:[0-9]+|0x[0-9a-f]*)$")


class Allowed(NamedTuple):
    """The attempt may proceed, to exactly these (checked) addresses."""

    addresses: tuple[str, ...]


class Refused(NamedTuple):
    """The attempt is refused. `reason` is a stable code, `detail` says why in words."""

    reason: str
    detail: str


Decision = Union[Allowed, Refused]  # noqa: UP007


def normalize_host(host: str) -> str | None:
    """The canonical form of a host (lower case, no trailing dot, IP literals canonical,
    IPv6 without brackets), or None when it is neither a hostname nor an IP literal.

    Digits-only or hex last labels ("127.1", "2130706433", "0x7f.1") are refused: the C
    resolver reads them as IPv4 addresses in shorthand, so they are IP literals in
    disguise.
    """
    h = host.strip()
    if h.startswith("[") and h.endswith("]"):
        h = h[1:-1]
    try:
        return str(ipaddress.ip_address(h))
    except ValueError:
        pass
    h = h.lower()
    if h.endswith("."):
        h = h[:-1]
    if not h or len(h) > 253 or not h.isascii():
        return None
    labels = h.split(".")
    if not all(_LABEL.match(label) for label in labels):
        return None
    if _NUMERIC_LABEL.match(labels[-1]):
        return None
    return h


def parse_entry(entry: str) -> tuple[str, int]:
    """One allowlist entry `host:port` (`[v6]:port` for IPv6) -> (canonical host, port).

    Raises:
        ValueError: with what is wrong (no port, bad port, bad host, a wildcard, a
            metadata or internal name).
    """
    host, sep, port_text = entry.rpartition(":")
    if not sep or not host:
        raise ValueError("host:port with a port")
    if ":" in host and not (host.startswith("[") and host.endswith("]")):
        raise ValueError("an IPv6 literal in brackets ([2001:db8::1]:443)")
    if not port_text.isdigit() or not 1 <= int(port_text) <= 65535 or port_text[0] == "0":
        raise ValueError("a port from 1 to 65535")
    if "*" in host:
        raise ValueError("an exact host (wildcards are not supported)")
    canonical = normalize_host(host)
    if canonical is None:
        raise ValueError("a hostname (letters, digits, '-', '_', dots) or an IP literal")
    if _internal_name(canonical):
        raise ValueError("a public host (metadata and internal names are always refused)")
    return canonical, int(port_text)


def _internal_name(host: str) -> bool:
    return host in METADATA_NAMES or host.endswith(INTERNAL_SUFFIXES)


def _embedded_ipv4(ip: IPAddress) -> ipaddress.IPv4Address | None:
    if not isinstance(ip, ipaddress.IPv6Address):
        return None
    if ip.ipv4_mapped is not None:
        return ip.ipv4_mapped
    if ip.sixtofour is not None:
        return ip.sixtofour
    if ip.teredo is not None:
        return ip.teredo[1]
    for net in _NAT64:
        if ip in net:
            return ipaddress.IPv4Address(int(ip) & 0xFFFFFFFF)
    return None


def classify(ip: IPAddress, unsafe_allow_nets: Sequence[IPNetwork] = ()) -> Refused | None:
    """Why `ip` must not be connected to, or None when it is a public address."""
    candidates: list[IPAddress] = [ip]
    inner = _embedded_ipv4(ip)
    if inner is not None:
        candidates.append(inner)
    for a in candidates:
        if a in METADATA_ADDRESSES:
            return Refused("metadata-address", f"{ip} is a cloud metadata address")
        if a.is_loopback:
            return Refused("private-address", f"{ip} is a loopback address")
    if any(ip in net for net in unsafe_allow_nets if net.version == ip.version):
        return None  # test-only (see the module docstring)
    for a in candidates:
        kind = _address_kind(a)
        if kind is not None:
            return Refused("private-address", f"{ip} is {kind}")
    return None


def _address_kind(a: IPAddress) -> str | None:
    if a.is_unspecified:
        return "an unspecified address"
    if a.is_link_local:
        return "a link-local address"
    if a.is_multicast:
        return "a multicast address"
    if isinstance(a, ipaddress.IPv4Address) and a in _SHARED:
        return "a shared (carrier-grade NAT) address"
    if a.is_private:
        return "a private address"
    if a.is_reserved:
        return "a reserved address"
    if not a.is_global:
        return "not a public address"
    return None


def decide(
    host: str,
    port: int,
    resolved: Sequence[str],
    allowlist: Sequence[str],
    unsafe_allow_nets: Sequence[IPNetwork] = (),
) -> Decision:
    """Whether a connection to `host:port` whose name resolved to `resolved` may proceed.

    Pure and total: `allowlist` holds `host:port` entries (entries that do not parse
    match nothing), `resolved` the addresses the broker's own lookup returned (IP
    literals resolve to themselves). On `Allowed`, connect only to its addresses.
    """
    canonical = normalize_host(host)
    if canonical is None:
        return Refused("bad-host", f"{host[:100]!r} is not a hostname or IP literal")
    target = _join(canonical, port)
    if not 1 <= port <= 65535:
        return Refused("bad-port", f"{target}: the port is out of range")
    if _internal_name(canonical):
        return Refused("metadata-name", f"{target} names a metadata or internal host")
    allowed = set()
    for entry in allowlist:
        try:
            allowed.add(parse_entry(entry))
        except ValueError:
            continue
    if (canonical, port) not in allowed:
        return Refused("not-allowed", f"{target} is not in the check's egress allowlist")
    if not resolved:
        return Refused("unresolved", f"{canonical} did not resolve")
    checked: list[str] = []
    for text in resolved:
        try:
            ip = ipaddress.ip_address(text.split("%", 1)[0])
        except ValueError:
            return Refused("unresolved", f"{canonical} resolved to {text[:60]!r}")
        problem = classify(ip, unsafe_allow_nets)
        if problem is not None:
            return Refused(problem.reason, f"{canonical}: {problem.detail}")
        if str(ip) not in checked:
            checked.append(str(ip))
    return Allowed(tuple(checked))


def _join(host: str, port: int) -> str:
    return f"[{host}]:{port}" if ":" in host else f"{host}:{port}"


# --- the broker program -------------------------------------------------------------

PROXY_PORT = 3128
DNS_PORT = 53
_HEAD_MAX = 64 * 1024
_MAX_CLIENTS = 64
_CONNECT_TIMEOUT = 10.0
_IDLE_TIMEOUT = 120.0
_DNS_NAME_MAX = 255


class Settings(NamedTuple):
    allowlist: tuple[str, ...]
    subnet: IPNetwork | None  # accept clients only on this network (the internal one)
    log_path: str
    ready_path: str
    max_entries: int
    max_bytes: int
    unsafe_allow_nets: tuple[IPNetwork, ...]
    unsafe_hosts: dict[str, tuple[str, ...]]

    @classmethod
    def from_json(cls, doc: dict[str, object]) -> Settings:
        def strings(key: str) -> tuple[str, ...]:
            value = doc.get(key) or []
            if not isinstance(value, list):
                raise ValueError(f"{key} must be a list")
            return tuple(str(v) for v in value)

        subnet = doc.get("subnet")
        hosts = doc.get("unsafe_hosts") or {}
        if not isinstance(hosts, dict):
            raise ValueError("unsafe_hosts must be a mapping")
        max_entries = doc.get("max_entries", 100000)
        max_bytes = doc.get("max_bytes", 8 << 20)
        return cls(
            allowlist=strings("allow"),
            subnet=ipaddress.ip_network(str(subnet)) if subnet else None,
            log_path=str(doc.get("log", "/proofgate-egress/log.jsonl")),
            ready_path=str(doc.get("ready", "/proofgate-egress/ready")),
            max_entries=int(max_entries) if isinstance(max_entries, int) else 100000,
            max_bytes=int(max_bytes) if isinstance(max_bytes, int) else 8 << 20,
            unsafe_allow_nets=tuple(ipaddress.ip_network(n) for n in strings("unsafe_allow_nets")),
            unsafe_hosts={
                normalize_host(str(k)) or str(k): tuple(str(a) for a in v)
                for k, v in hosts.items()
                if isinstance(v, list)
            },
        )


class Log:
    """JSON lines, one per attempt, flushed as written; bounded by `max_entries` and by
    `max_bytes` (the summary line comes on top), so proofgate's read-back is bounded too.
    Past either bound an attempt is only counted (`dropped`). After the summary, the file
    `done` beside the log tells proofgate the log is final."""

    def __init__(self, path: str, max_entries: int, max_bytes: int = 8 << 20) -> None:
        self._path = path
        self._file = open(path, "ab")  # noqa: SIM115 — lives as long as the broker
        self._lock = threading.Lock()
        self._max = max_entries
        self._max_bytes = max_bytes
        self.bytes = 0
        self.written = 0
        self.dropped = 0
        self.closed = False

    def write(self, entry: dict[str, object]) -> None:
        line = (json.dumps(entry, sort_keys=True, separators=(",", ":")) + "\n").encode()
        with self._lock:
            if self.closed:
                return
            if self.written >= self._max or self.bytes + len(line) > self._max_bytes:
                self.dropped += 1
                return
            self.written += 1
            self.bytes += len(line)
            self._file.write(line)
            self._file.flush()

    def close(self) -> None:
        with self._lock:
            if self.closed:
                return
            self.closed = True
            summary = {"kind": "summary", "written": self.written, "dropped": self.dropped}
            self._file.write((json.dumps(summary) + "\n").encode())
            self._file.flush()
            self._file.close()
        with open(os.path.join(os.path.dirname(self._path), "done"), "w", encoding="utf-8") as f:
            f.write("done\n")


class Broker:
    def __init__(self, settings: Settings) -> None:
        self.settings = settings
        self.log = Log(settings.log_path, settings.max_entries, settings.max_bytes)
        self._slots = threading.BoundedSemaphore(_MAX_CLIENTS)
        # Connections being relayed: logged at the end, or by `stop` if still open then.
        self._open: dict[int, tuple[dict[str, object], list[int], float]] = {}
        self._open_lock = threading.Lock()

    def stop(self) -> None:
        """Log every connection still open (with its bytes so far), then the summary.

        After this nothing more is logged: the log proofgate reads is final."""
        with self._open_lock:
            for entry, counts, t0 in self._open.values():
                entry.update(
                    bytes_up=counts[0],
                    bytes_down=counts[1],
                    duration_s=round(time.monotonic() - t0, 3),
                    open_at_stop=True,
                )
                self.log.write(entry)
            self._open.clear()
            self.log.close()

    # client acceptance ----------------------------------------------------------

    def on_our_network(self, sock: socket.socket) -> bool:
        subnet = self.settings.subnet
        if subnet is None:
            return True
        try:
            local = ipaddress.ip_address(sock.getsockname()[0])
        except (OSError, ValueError):
            return False
        return local in subnet

    def serve_proxy(self, listener: socket.socket) -> None:
        while True:
            conn, _ = listener.accept()
            if not self.on_our_network(conn) or not self._slots.acquire(blocking=False):
                conn.close()
                continue
            threading.Thread(target=self._client, args=(conn,), daemon=True).start()

    def _client(self, conn: socket.socket) -> None:
        try:
            self.handle(conn)
        except Exception as e:  # noqa: BLE001 — one client's failure must not end the broker
            print(f"proofgate-egress: client error: {e!r}", file=sys.stderr, flush=True)
        finally:
            self._slots.release()
            _close(conn)

    # one proxied request ----------------------------------------------------------

    def resolve(self, host: str, port: int) -> tuple[str, ...]:
        canonical = normalize_host(host) or host
        if canonical in self.settings.unsafe_hosts:
            return self.settings.unsafe_hosts[canonical]
        try:
            ipaddress.ip_address(canonical)
            return (canonical,)
        except ValueError:
            pass
        try:
            infos = socket.getaddrinfo(canonical, port, proto=socket.IPPROTO_TCP)
        except (OSError, UnicodeError):
            return ()
        out: list[str] = []
        for info in infos:
            address = str(info[4][0])
            if address not in out:
                out.append(address)
        return tuple(out)

    def handle(self, conn: socket.socket) -> None:
        t0 = time.monotonic()
        conn.settimeout(_IDLE_TIMEOUT)
        head, rest = _read_head(conn)
        entry: dict[str, object] = {"kind": "http", "host": None, "port": None}
        if head is None:
            self._refuse(conn, entry, t0, Refused("bad-request", "not an HTTP proxy request"))
            return
        request_line, _, header_block = head.partition(b"\r\n")
        parts = request_line.decode("latin-1").split(" ")
        if len(parts) != 3:
            self._refuse(conn, entry, t0, Refused("bad-request", "malformed request line"))
            return
        method, target, version = parts
        if method.upper() == "CONNECT":
            entry["kind"] = "connect"
            hostport = _split_hostport(target, None)
            path = None
        else:
            hostport, path = _split_absolute_http(target)
        if hostport is None:
            self._refuse(
                conn,
                entry,
                t0,
                Refused(
                    "bad-request",
                    "expected CONNECT host:port or an absolute http:// URI "
                    "(use the HTTPS_PROXY/HTTP_PROXY variables)",
                ),
            )
            return
        host, port = hostport
        entry["host"] = (normalize_host(host) or host)[:255]
        entry["port"] = port
        decision = decide(
            host,
            port,
            self.resolve(host, port) if _looks_allowed(host, port, self.settings) else (),
            self.settings.allowlist,
            self.settings.unsafe_allow_nets,
        )
        if isinstance(decision, Refused):
            self._refuse(conn, entry, t0, decision)
            return
        upstream = _connect_any(decision.addresses, port)
        if upstream is None:
            self._refuse(
                conn,
                entry,
                t0,
                Refused("connect-failed", f"{_join(str(entry['host']), port)} did not answer"),
                status=502,
            )
            return
        entry["address"] = upstream.getpeername()[0]
        entry["decision"] = "allowed"
        counts = [0, 0]
        key = id(entry)
        with self._open_lock:
            self._open[key] = (entry, counts, t0)
        try:
            if path is None:
                conn.sendall(b"HTTP/1.1 200 Connection established\r\n\r\n")
                first = rest
            else:
                first = _rewrite_head(method, path, version, header_block) + rest
            _relay(conn, upstream, first, counts)
        finally:
            _close(upstream)
            with self._open_lock:
                still_open = self._open.pop(key, None) is not None
            if still_open:  # else `stop` logged it already
                entry.update(
                    bytes_up=counts[0],
                    bytes_down=counts[1],
                    duration_s=round(time.monotonic() - t0, 3),
                )
                self.log.write(entry)

    def _refuse(
        self,
        conn: socket.socket,
        entry: dict[str, object],
        t0: float,
        refused: Refused,
        status: int = 403,
    ) -> None:
        target = (
            _join(str(entry["host"]), int(str(entry["port"])))
            if entry.get("host") is not None
            else "?"
        )
        phrase = _printable(f"proofgate egress refused {target} ({refused.reason})")
        body = (
            f"proofgate egress broker refused {target}: {refused.detail} [{refused.reason}]\n"
        ).encode("utf-8", "replace")
        status_text = "Forbidden" if status == 403 else "Bad Gateway"
        response = (
            f"HTTP/1.1 {status} {phrase if status == 403 else status_text}\r\n"
            "Content-Type: text/plain; charset=utf-8\r\n"
            f"Content-Length: {len(body)}\r\n"
            "Connection: close\r\n"
            "X-Proofgate-Egress: refused\r\n\r\n"
        ).encode("latin-1", "replace") + body
        try:
            conn.sendall(response)
        except OSError:
            pass
        entry.update(
            decision="refused",
            reason=refused.reason,
            detail=refused.detail[:300],
            bytes_up=0,
            bytes_down=0,
            duration_s=round(time.monotonic() - t0, 3),
        )
        self.log.write(entry)

    # DNS --------------------------------------------------------------------------

    def serve_dns_udp(self, sock: socket.socket) -> None:
        subnet = self.settings.subnet
        while True:
            data, peer = sock.recvfrom(4096)
            if subnet is not None and not _in(peer[0], subnet):
                continue
            reply = self._dns(data, "udp")
            if reply is not None:
                try:
                    sock.sendto(reply, peer)
                except OSError:
                    pass

    def serve_dns_tcp(self, listener: socket.socket) -> None:
        while True:
            conn, _ = listener.accept()
            if not self.on_our_network(conn):
                conn.close()
                continue
            threading.Thread(target=self._dns_tcp_client, args=(conn,), daemon=True).start()

    def _dns_tcp_client(self, conn: socket.socket) -> None:
        try:
            conn.settimeout(10)
            size = struct.unpack("!H", _recv_exact(conn, 2))[0]
            reply = self._dns(_recv_exact(conn, size), "tcp")
            if reply is not None:
                conn.sendall(struct.pack("!H", len(reply)) + reply)
        except (OSError, struct.error, ValueError):
            pass
        finally:
            _close(conn)

    def _dns(self, data: bytes, transport: str) -> bytes | None:
        """Log the query and answer REFUSED (the clean room has no name resolution)."""
        if len(data) < 12:
            return None
        name, qtype, end = _dns_question(data)
        self.log.write(
            {
                "kind": "dns",
                "host": name,
                "port": DNS_PORT,
                "qtype": qtype,
                "transport": transport,
                "decision": "refused",
                "reason": "dns-refused",
                "bytes_up": len(data),
                "bytes_down": 0,
                "duration_s": 0.0,
            }
        )
        flags = struct.unpack("!H", data[2:4])[0]
        reply_flags = 0x8000 | (flags & 0x7900) | 5  # QR, opcode and RD copied, REFUSED
        qdcount = 1 if end else 0
        return data[:2] + struct.pack("!HHHHH", reply_flags, qdcount, 0, 0, 0) + data[12:end]


def _in(address: str, subnet: IPNetwork) -> bool:
    try:
        return ipaddress.ip_address(address) in subnet
    except ValueError:
        return False


def _looks_allowed(host: str, port: int, settings: Settings) -> bool:
    """Only names on the allowlist are resolved: a lookup of any other name would itself
    carry data out through DNS."""
    canonical = normalize_host(host)
    if canonical is None:
        return False
    for entry in settings.allowlist:
        try:
            if parse_entry(entry) == (canonical, port):
                return True
        except ValueError:
            continue
    return False


def _dns_question(data: bytes) -> tuple[str, int | None, int]:
    """(query name, qtype, end offset of the question) of a DNS message; bounded."""
    labels: list[str] = []
    i = 12
    total = 0
    try:
        while True:
            n = data[i]
            if n == 0:
                i += 1
                break
            if n & 0xC0 or total + n > _DNS_NAME_MAX:
                return ".".join(labels), None, 0
            labels.append(data[i + 1 : i + 1 + n].decode("ascii", "backslashreplace"))
            total += n + 1
            i += 1 + n
        qtype = struct.unpack("!H", data[i : i + 2])[0]
        return ".".join(labels), qtype, i + 4 if len(data) >= i + 4 else 0
    except (IndexError, struct.error):
        return ".".join(labels), None, 0


def _read_head(conn: socket.socket) -> tuple[bytes | None, bytes]:
    buf = b""
    while b"\r\n\r\n" not in buf:
        if len(buf) > _HEAD_MAX:
            return None, b""
        try:
            chunk = conn.recv(8192)
        except OSError:
            return None, b""
        if not chunk:
            return None, b""
        buf += chunk
        if not buf[:1].isalpha():
            return None, b""  # e.g. a TLS ClientHello sent straight at the broker
    head, _, rest = buf.partition(b"\r\n\r\n")
    return head, rest


def _split_hostport(text: str, default_port: int | None) -> tuple[str, int] | None:
    if text.startswith("["):
        close = text.find("]")
        if close < 0:
            return None
        host, tail = text[1:close], text[close + 1 :]
        if tail and not tail.startswith(":"):
            return None
        port_text = tail[1:] if tail else ""
    else:
        host, sep, port_text = text.rpartition(":")
        if not sep:
            host, port_text = text, ""
        elif ":" in host:
            return None
    if not port_text:
        if default_port is None:
            return None
        return host, default_port
    if not port_text.isdigit() or len(port_text) > 5:
        return None
    return host, int(port_text)


def _split_absolute_http(target: str) -> tuple[tuple[str, int] | None, str]:
    if not target.lower().startswith("http://"):
        return None, ""
    rest = target[len("http://") :]
    slash = rest.find("/")
    authority, path = (rest, "/") if slash < 0 else (rest[:slash], rest[slash:])
    if "@" in authority:
        return None, ""  # userinfo: refuse rather than guess which part is the host
    return _split_hostport(authority, 80), path


def _rewrite_head(method: str, path: str, version: str, header_block: bytes) -> bytes:
    lines = [f"{method} {path} {version}".encode("latin-1")]
    for line in header_block.split(b"\r\n"):
        name = line.partition(b":")[0].strip().lower()
        if not line or name in (b"proxy-connection", b"proxy-authorization", b"connection"):
            continue
        lines.append(line)
    lines.append(b"Connection: close")
    return b"\r\n".join(lines) + b"\r\n\r\n"


def _connect_any(addresses: Sequence[str], port: int) -> socket.socket | None:
    for address in addresses:
        try:
            sock = socket.create_connection((address, port), timeout=_CONNECT_TIMEOUT)
        except OSError:
            continue
        sock.settimeout(_IDLE_TIMEOUT)
        return sock
    return None


def _relay(client: socket.socket, upstream: socket.socket, first: bytes, counts: list[int]) -> None:
    """Copy both ways until both sides are done, counting into `counts` as it goes
    ([bytes client->upstream, bytes upstream->client])."""

    def pump(src: socket.socket, dst: socket.socket, index: int) -> None:
        try:
            while True:
                data = src.recv(65536)
                if not data:
                    break
                dst.sendall(data)
                counts[index] += len(data)
        except OSError:
            pass
        finally:
            try:
                dst.shutdown(socket.SHUT_WR)
            except OSError:
                pass

    if first:
        upstream.sendall(first)
        counts[0] += len(first)
    back = threading.Thread(target=pump, args=(upstream, client, 1), daemon=True)
    back.start()
    pump(client, upstream, 0)
    back.join()


def _recv_exact(conn: socket.socket, n: int) -> bytes:
    buf = b""
    while len(buf) < n:
        chunk = conn.recv(n - len(buf))
        if not chunk:
            raise ValueError("short read")
        buf += chunk
    return buf


def _printable(text: str) -> str:
    return "".join(c if " " <= c <= "~" else "?" for c in text)[:200]


def _close(sock: socket.socket) -> None:
    try:
        sock.close()
    except OSError:
        pass


def _listen(kind: int, port: int) -> socket.socket:
    sock = socket.socket(socket.AF_INET, kind)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind(("0.0.0.0", port))  # noqa: S104 — clients are filtered by local address
    if kind == socket.SOCK_STREAM:
        sock.listen(128)
    return sock


def main(argv: Sequence[str]) -> int:
    if len(argv) != 2:
        print("usage: egress_broker.py CONFIG.json", file=sys.stderr)
        return 2
    with open(argv[1], encoding="utf-8") as f:
        settings = Settings.from_json(json.load(f))
    broker = Broker(settings)
    proxy = _listen(socket.SOCK_STREAM, PROXY_PORT)
    dns_udp = _listen(socket.SOCK_DGRAM, DNS_PORT)
    dns_tcp = _listen(socket.SOCK_STREAM, DNS_PORT)
    stop = threading.Event()

    def on_term(_signum: int, _frame: object) -> None:
        stop.set()

    signal.signal(signal.SIGTERM, on_term)
    signal.signal(signal.SIGINT, on_term)
    for target, sock in (
        (broker.serve_proxy, proxy),
        (broker.serve_dns_udp, dns_udp),
        (broker.serve_dns_tcp, dns_tcp),
    ):
        threading.Thread(target=target, args=(sock,), daemon=True).start()
    with open(settings.ready_path, "w", encoding="utf-8") as f:
        f.write("ready\n")
    while not stop.wait(3600):
        pass
    broker.stop()
    # Keep running: proofgate reads the final log from the live container, then removes
    # it (the container is auto-removed when it stops, also by a restarted daemon).
    while True:
        time.sleep(3600)


if __name__ == "__main__":
    sys.exit(main(sys.argv))
