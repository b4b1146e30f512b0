"""Who is at the other end of an HTTP request: the visitor's address and scheme, read through the
reverse proxies the settings trust (``server.trusted_proxies``). Streamlit-free and FastAPI-free: the
app's gate (``pages/_gate.py``) and the REST/MCP servers' :class:`~knowledge.server.guard.Guard` use it.

* The forwarding headers (``Forwarded``, RFC 7239; ``X-Forwarded-For``, ``X-Forwarded-Proto``,
  ``X-Forwarded-Host``, ``X-Real-IP``) are **honoured only from a direct peer in the trusted list**.
  From any other peer they are ignored: the address is the connection's, the scheme the connection's.
* A request carrying any of them **came through a proxy**, trusted or not, so its visitor is never
  *local* (:attr:`Peer.local`): a proxy on the same host as a loopback-bound server would otherwise make
  every visitor the local admin. That holds with the default (nothing trusted) too: forwarding headers
  from loopback make a request "proxied", not "local".
* Through a trusted chain the visitor is the rightmost address that is not itself a trusted proxy
  (what the nearest proxy saw; anything to its left was written by the client and is not believed);
  the scheme is the one the visitor used (``proto=`` of its ``Forwarded`` element, else the first
  ``X-Forwarded-Proto`` value): behind TLS at the proxy the session cookie is ``Secure``.
"""

from __future__ import annotations

import ipaddress
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

#: Headers a reverse proxy adds; any one of them (from any peer) makes a request "proxied".
FORWARDING_HEADERS = ("forwarded", "x-forwarded-for", "x-forwarded-proto", "x-forwarded-host", "x-real-ip")

Network = ipaddress.IPv4Network | ipaddress.IPv6Network


@dataclass(frozen=True)
class Peer:
    """The visitor of one request.

    Attributes:
        address: its IP address as far as it can be known (``None``: unknown, e.g. ``for=unknown`` or
            an obfuscated ``for=_hidden`` from a trusted proxy, or no client in the scope).
        scheme: ``"https"`` or ``"http"``, as the visitor reached the first trusted proxy (or us).
        proxied: the request carried forwarding headers: it came through a proxy.
    """

    address: str | None
    scheme: str = "http"
    proxied: bool = False

    @property
    def local(self) -> bool:
        """On this computer and not through a proxy: a loopback address, no forwarding header."""
        ip = _ip(self.address)
        return not self.proxied and (self.address == "localhost" or (ip is not None and ip.is_loopback))

    @property
    def secure(self) -> bool:
        """Reached over TLS (at a trusted proxy, or directly): a cookie for it is ``Secure``."""
        return self.scheme == "https"


def trusted_networks(entries: Iterable[str]) -> tuple[Network, ...]:
    """The networks of ``entries`` (addresses ``10.0.0.5``, ``::1`` or CIDRs ``10.0.0.0/24``).

    Raises:
        ValueError: an entry that is neither an address nor a network (the message names it).
    """
    out = []
    for entry in entries:
        text = str(entry).strip().strip("[]") if "/" not in str(entry) else str(entry).strip()
        try:
            out.append(ipaddress.ip_network(text, strict=False))
        except ValueError:
            raise ValueError(f"{entry!r} is not an IP address or network (write 10.0.0.5, ::1 or 10.0.0.0/24)") from None
    return tuple(out)


def _ip(address: str | None) -> ipaddress.IPv4Address | ipaddress.IPv6Address | None:
    if not address:
        return None
    try:
        ip = ipaddress.ip_address(address.strip().strip("[]"))
    except ValueError:
        return None
    mapped = getattr(ip, "ipv4_mapped", None)
    return mapped if mapped is not None else ip


def is_trusted(address: str | None, trusted: Iterable[Network]) -> bool:
    """Whether ``address`` (an IP address; anything else is not) lies in one of ``trusted``."""
    ip = _ip(address)
    return ip is not None and any(ip.version == net.version and ip in net for net in trusted)


_PAIR = re.compile(r'\s*([!#$%&\'*+.^_`|~0-9A-Za-z-]+)\s*=\s*("(?:[^"\\]|\\.)*"|[^;,\s]*)\s*')


def parse_forwarded(value: str) -> list[dict[str, str]]:
    """The elements of a ``Forwarded`` header (RFC 7239), leftmost first: each a dict of its
    lower-cased parameter names (``for``, ``by``, ``proto``, ``host``) to their unquoted values.
    ``for=192.0.2.60;proto=http, for="[2001:db8:cafe::17]:4711"`` gives two elements. A malformed
    element is kept empty (so the chain's length stays right)."""
    elements: list[dict[str, str]] = []
    for raw in _split_outside_quotes(value, ","):
        element: dict[str, str] = {}
        for pair in _split_outside_quotes(raw, ";"):
            m = _PAIR.fullmatch(pair)
            if m is None:
                continue
            v = m.group(2)
            if v.startswith('"') and v.endswith('"') and len(v) >= 2:
                v = re.sub(r"\\(.)", r"\1", v[1:-1])
            element[m.group(1).lower()] = v
        elements.append(element)
    return elements


def _split_outside_quotes(text: str, sep: str) -> list[str]:
    parts, current, quoted, escaped = [], [], False, False
    for ch in text:
        if escaped:
            current.append(ch)
            escaped = False
        elif ch == "\\" and quoted:
            current.append(ch)
            escaped = True
        elif ch == '"':
            current.append(ch)
            quoted = not quoted
        elif ch == sep and not quoted:
            parts.append("".join(current))
            current = []
        else:
            current.append(ch)
    parts.append("".join(current))
    return [p for p in (s.strip() for s in parts) if p] if sep == ";" else [p.strip() for p in parts]


def node_address(node: str | None) -> str | None:
    """The IP address of a forwarded node (``192.0.2.1``, ``192.0.2.1:80``, ``[2001:db8::1]:80``,
    ``2001:db8::1``), or ``None`` for ``unknown``, an obfuscated ``_name`` or anything else."""
    if not node:
        return None
    text = node.strip().strip('"')
    if text.startswith("["):
        text = text[1:].split("]", 1)[0]
    elif text.count(":") == 1:  # IPv4 with a port
        text = text.split(":", 1)[0]
    ip = _ip(text)
    return str(ip) if ip is not None else None


def peer(client: str | None, headers: Mapping[str, str], scheme: str = "http", trusted: Iterable[Network] = ()) -> Peer:
    """The visitor of a request that reached us from ``client`` (the connection's address) over
    ``scheme`` (``http``/``https``/``ws``/``wss``) with ``headers`` (names lower-case, one value each;
    repeated headers joined with ``", "``). See the module docstring for the rules."""
    scheme = "https" if scheme in ("https", "wss") else "http"
    proxied = any(h in headers for h in FORWARDING_HEADERS)
    nets = tuple(trusted)
    if not proxied or not is_trusted(client, nets):
        return Peer(client or None, scheme, proxied)
    protos: list[str | None]
    if "forwarded" in headers:
        elements = parse_forwarded(headers["forwarded"])
        hops = [node_address(e.get("for")) for e in elements]
        protos = [e.get("proto") for e in elements]
    elif "x-forwarded-for" in headers:
        hops = [node_address(h) for h in headers["x-forwarded-for"].split(",")]
        first = headers.get("x-forwarded-proto", "").split(",")[0].strip() or None
        protos = [first] * len(hops)
    else:
        hops = [node_address(headers.get("x-real-ip"))] if "x-real-ip" in headers else []
        first = headers.get("x-forwarded-proto", "").split(",")[0].strip() or None
        protos = [first] * max(1, len(hops))
    if not hops:  # a trusted proxy that names no visitor: unknown, through it
        proto = protos[0] if protos else None
        return Peer(None, _scheme(proto, scheme), True)
    i = len(hops) - 1
    while i > 0 and hops[i] is not None and is_trusted(hops[i], nets):
        i -= 1
    return Peer(hops[i], _scheme(protos[i], scheme), True)


def _scheme(proto: str | None, fallback: str) -> str:
    p = (proto or "").strip().strip('"').lower()
    return {"https": "https", "wss": "https", "http": "http", "ws": "http"}.get(p, fallback)


def scope_headers(scope: Mapping[str, Any]) -> dict[str, str]:
    """An ASGI scope's headers: names lower-case, repeated ones joined with ``", "`` (latin-1)."""
    out: dict[str, str] = {}
    for k, v in scope.get("headers") or []:
        name, value = k.decode("latin-1").lower(), v.decode("latin-1")
        out[name] = f"{out[name]}, {value}" if name in out else value
    return out


def scope_peer(scope: Mapping[str, Any], trusted: Iterable[Network] = ()) -> Peer:
    """:func:`peer` of an ASGI ``http`` or ``websocket`` scope."""
    client = (scope.get("client") or (None, None))[0]
    return peer(client, scope_headers(scope), str(scope.get("scheme") or "http"), trusted)


__all__ = [
    "FORWARDING_HEADERS",
    "Peer",
    "is_trusted",
    "node_address",
    "parse_forwarded",
    "peer",
    "scope_headers",
    "scope_peer",
    "trusted_networks",
]
