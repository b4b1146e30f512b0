"""Who is at the other end of a request (knowledge/forwarded.py): forwarding headers are believed only
from the proxies ``server.trusted_proxies`` names, a request through any proxy is never local, and
https at a trusted proxy makes the session cookie Secure. The REST/MCP Guard refuses a proxied request
when it has no key and no accounts (it would act as the local admin)."""

from __future__ import annotations

import pytest
from starlette.applications import Starlette
from starlette.responses import PlainTextResponse
from starlette.routing import Route
from starlette.testclient import TestClient

from knowledge.config import load_settings
from knowledge.errors import ConfigError
from knowledge.forwarded import node_address, parse_forwarded, peer, scope_peer, trusted_networks
from knowledge.server.guard import Guard

LOCAL_PROXY = trusted_networks(["127.0.0.1", "::1"])
LAN_PROXIES = trusted_networks(["10.0.0.0/24"])


def test_without_forwarding_headers_the_connection_is_the_visitor():
    assert peer("127.0.0.1", {}).local
    assert peer("::1", {}, "https").local and peer("::1", {}, "https").secure
    assert not peer("192.0.2.7", {}).local
    assert peer("127.0.0.1", {}, trusted=LOCAL_PROXY).local  # a trusted proxy's host, browsing directly


@pytest.mark.parametrize(
    "header",
    [
        ("x-forwarded-for", "127.0.0.1"),
        ("forwarded", "for=127.0.0.1"),
        ("x-forwarded-proto", "http"),
        ("x-real-ip", "127.0.0.1"),
        ("x-forwarded-host", "knowledge.example.org"),
    ],
)
def test_forwarding_headers_from_loopback_are_never_local_trusted_or_not(header):
    """The default (nothing trusted): a same-host proxy's request is proxied, not the local admin."""
    for trusted in ((), LOCAL_PROXY):
        visitor = peer("127.0.0.1", dict([header]), trusted=trusted)
        assert visitor.proxied and not visitor.local, (header, trusted)


def test_a_trusted_proxy_names_the_visitor_and_its_scheme():
    visitor = peer("127.0.0.1", {"x-forwarded-for": "203.0.113.9", "x-forwarded-proto": "https"}, trusted=LOCAL_PROXY)
    assert (visitor.address, visitor.scheme, visitor.secure, visitor.local) == ("203.0.113.9", "https", True, False)
    # the proxy's own network is skipped from the right; what the client wrote on the left is not believed
    visitor = peer("10.0.0.2", {"x-forwarded-for": "127.0.0.1, 198.51.100.4, 10.0.0.3"}, trusted=LAN_PROXIES)
    assert visitor.address == "198.51.100.4" and visitor.scheme == "http"


def test_a_spoofed_forwarded_for_from_a_direct_client_is_ignored():
    for trusted in ((), LOCAL_PROXY, LAN_PROXIES):
        visitor = peer(
            "198.51.100.4",
            {"x-forwarded-for": "127.0.0.1", "x-forwarded-proto": "https", "forwarded": "for=127.0.0.1;proto=https"},
            "http",
            trusted,
        )
        assert visitor.address == "198.51.100.4"  # its own address, not the one it wrote
        assert visitor.scheme == "http" and not visitor.secure  # nor the scheme it claims
        assert visitor.proxied and not visitor.local


def test_forwarded_rfc_7239_syntax():
    header = 'for=192.0.2.60;proto=http;by=203.0.113.43, For="[2001:db8:cafe::17]:4711";PROTO=https'
    assert parse_forwarded(header) == [
        {"for": "192.0.2.60", "proto": "http", "by": "203.0.113.43"},
        {"for": "[2001:db8:cafe::17]:4711", "proto": "https"},
    ]
    assert parse_forwarded('for="_gazonk"') == [{"for": "_gazonk"}]
    assert parse_forwarded('for="a\\"b;c,d";proto=https') == [{"for": 'a"b;c,d', "proto": "https"}]
    assert [
        node_address(n) for n in ("192.0.2.60:80", "[2001:db8::1]:4711", "2001:db8::1", "unknown", "_hidden", "", None)
    ] == ["192.0.2.60", "2001:db8::1", "2001:db8::1", None, None, None, None]
    visitor = peer("127.0.0.1", {"forwarded": header}, trusted=LOCAL_PROXY)
    assert (visitor.address, visitor.scheme) == ("2001:db8:cafe::17", "https")
    # Forwarded wins over X-Forwarded-For when both come; an obfuscated client stays unknown
    visitor = peer(
        "127.0.0.1", {"forwarded": "for=_hidden;proto=https", "x-forwarded-for": "192.0.2.1"}, trusted=LOCAL_PROXY
    )
    assert visitor.address is None and visitor.secure and not visitor.local


def test_the_scope_of_an_asgi_request_and_a_websocket():
    scope = {
        "type": "websocket",
        "scheme": "wss",
        "client": ("127.0.0.1", 5000),
        "headers": [(b"X-Forwarded-For", b"192.0.2.1"), (b"x-forwarded-for", b"192.0.2.2")],
    }
    visitor = scope_peer(scope, LOCAL_PROXY)
    assert visitor.address == "192.0.2.2" and visitor.secure  # repeated headers joined, the rightmost one
    assert not scope_peer({"type": "http", "headers": []}).local  # no client: unknown, not local


def test_the_setting_takes_addresses_and_networks_only(tmp_path, monkeypatch):
    monkeypatch.setenv("KNOWLEDGE_SERVER__TRUSTED_PROXIES", "127.0.0.1, ::1,10.0.0.0/24")
    assert load_settings(data_dir=tmp_path).server.trusted_proxies == ["127.0.0.1", "::1", "10.0.0.0/24"]
    monkeypatch.setenv("KNOWLEDGE_SERVER__TRUSTED_PROXIES", "proxy.example.org")
    with pytest.raises(ConfigError, match=r"server\.trusted_proxies.*proxy\.example\.org"):
        load_settings(data_dir=tmp_path)
    monkeypatch.delenv("KNOWLEDGE_SERVER__TRUSTED_PROXIES")
    assert load_settings(data_dir=tmp_path).server.trusted_proxies == []


def _guarded(**kwargs) -> TestClient:
    app = Starlette(routes=[Route("/v1/models", lambda request: PlainTextResponse("served"))])
    return TestClient(Guard(app, max_body=1000, allowed_hosts=["testserver"], **kwargs))


def test_a_keyless_api_refuses_what_came_through_a_proxy():
    """Without a key and accounts every request is the local admin: a same-host proxy's request (its
    forwarding headers, whoever sent them) is refused, a local one served."""
    client = _guarded()
    assert client.get("/v1/models").text == "served"
    for header in ({"X-Forwarded-For": "203.0.113.9"}, {"Forwarded": "for=127.0.0.1"}, {"X-Real-IP": "127.0.0.1"}):
        refused = client.get("/v1/models", headers=header)
        assert refused.status_code == 401 and "not through a proxy" in refused.json()["error"]["message"], header
    trusted = _guarded(trusted_proxies=["127.0.0.1"])  # trusting the proxy does not make its visitors local
    assert trusted.get("/v1/models", headers={"X-Forwarded-For": "127.0.0.1"}).status_code == 401
    keyed = _guarded(api_key="k" * 20)  # with a key, a proxied request is served as any other
    assert (
        keyed.get("/v1/models", headers={"X-Forwarded-For": "203.0.113.9", "Authorization": "Bearer " + "k" * 20}).text
        == "served"
    )
