"""``ingest STORE http://...``: web pages on the command line, from a real HTTP server on 127.0.0.1."""

from __future__ import annotations

import json

import pytest

from knowledge.cli import main
from knowledge.cli.ingest import is_url
from tests.helpers.web import Site, page

pytestmark = pytest.mark.model


def run(capsys, *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


@pytest.mark.slow  # a uvicorn server or the real model; tests/service/test_web.py covers the same in the inner loop
def test_ingest_a_web_page_and_its_links(tmp_path, capsys, monkeypatch, site: Site):
    monkeypatch.setenv("KNOWLEDGE_INGEST__WEB_ALLOW_PRIVATE", "true")
    data = str(tmp_path / "data")
    site.html(
        "/page.html", page("Lighthouses", "The lighthouse keeper trims the lamp at dusk.", ("/more.html", "/gone.html"))
    )
    site.html("/more.html", page("More", "Foghorns sound when the fog rolls in."))
    url = site.url("/page.html")
    code, out, _ = run(capsys, "--data-dir", data, "ingest", "web", url)
    assert code == 0 and url in out and "indexed" in out and "1 file: 1 indexed" in out
    code, out, _ = run(capsys, "--data-dir", data, "search", "web", "lighthouse keeper lamp", "-k", "1", "--json")
    [hit] = json.loads(out)
    assert hit["file_name"] == url and "lighthouse" in hit["text"]

    code, out, _ = run(capsys, "--data-dir", data, "ingest", "web", url, "--depth", "1", "--json")
    by_name = {r["name"]: r for r in json.loads(out)}
    assert code == 1  # /gone.html is a 404: reported, the rest went on
    assert by_name[url]["outcome"] == "unchanged"
    assert by_name[site.url("/more.html")]["outcome"] == "indexed"
    assert "not found (HTTP 404)" in by_name[site.url("/gone.html")]["message"]


@pytest.mark.slow
def test_ingest_url_refused_by_default_and_bad_schemes(tmp_path, capsys, site: Site):
    data = str(tmp_path / "data")
    code, out, _ = run(capsys, "--data-dir", data, "ingest", "web", site.url("/"), "ftp://example.org/x")
    assert code == 1
    assert "loopback address" in out and "ingest.web_allow_private" in out
    assert "only http:// and https://" in out
    assert site.requests == []


def test_is_url():
    assert is_url("https://x.org/") and is_url("http://127.0.0.1:8080/a") and is_url("ftp://x")
    assert not is_url("docs/notes.md") and not is_url("C:\\docs") and not is_url("://x")
