"""``POST /v1/vector_stores/{id}/web_pages``: a web page (and its same-site links) added as a file
batch, over HTTP to a uvicorn server, the pages from a real HTTP server on 127.0.0.1."""

from __future__ import annotations

import time

import httpx
import openai

from knowledge.config import load_settings
from knowledge.embeddings.fake import HashEmbedder
from knowledge.server.app import create_app
from knowledge.system import System
from knowledge.workbench import Workbench
from tests.helpers.api import Served
from tests.helpers.web import Site, page


def served(tmp_path, **ingest):
    system = System(
        load_settings(data_dir=tmp_path / "data", ingest={"max_file_mb": 2, **ingest}),
        embedder_factory=lambda model: HashEmbedder(dimension=64, max_tokens=256),
    )
    return system, Workbench(system), Served(create_app(system))


def wait_batch(http: httpx.Client, vs: str, batch: str) -> dict:
    deadline = time.monotonic() + 60
    while True:
        b = http.get(f"/v1/vector_stores/{vs}/file_batches/{batch}").json()
        if b["status"] != "in_progress" or time.monotonic() > deadline:
            return b
        time.sleep(0.05)


def test_web_pages_route_adds_a_crawl_as_a_file_batch(tmp_path, site: Site):
    site.html("/", page("Harbour", "The harbour master logs every tugboat.", ("/quay.html", "/missing.html")))
    site.html("/quay.html", page("Quay", "Cranes unload the container ships at the quay."))
    system, wb, server = served(tmp_path, web_allow_private=True)
    try:
        with server as base, httpx.Client(base_url=base, timeout=60) as http:
            vs = http.post("/v1/vector_stores", json={"name": "web"}).json()["id"]
            r = http.post(
                f"/v1/vector_stores/{vs}/web_pages", json={"url": site.url("/"), "depth": 1, "attributes": {"team": "ops"}}
            )
            assert r.status_code == 200, r.text
            body = r.json()
            assert body["object"] == "vector_store.files_batch" and body["id"].startswith("vsfb_")
            pages = {p["url"]: p for p in body["web_pages"]}
            assert pages[site.url("/")]["status"] == "added" and pages[site.url("/quay.html")]["status"] == "added"
            assert pages[site.url("/missing.html")]["status"] == "failed"
            assert "not found (HTTP 404)" in pages[site.url("/missing.html")]["last_error"]["message"]
            done = wait_batch(http, vs, body["id"])
            assert done["status"] == "completed" and done["file_counts"]["completed"] == 2, done
            files = http.get(f"/v1/vector_stores/{vs}/file_batches/{body['id']}/files").json()["data"]
            assert {f["attributes"]["source_url"] for f in files} == {site.url("/"), site.url("/quay.html")}
            assert all(f["attributes"]["team"] == "ops" for f in files)
            client = openai.OpenAI(base_url=base + "/v1", api_key="unused", max_retries=0)
            hits = client.vector_stores.search(vs, query="container ships quay").data
            assert hits[0].filename == site.url("/quay.html")
            assert hits[0].attributes["source_url"] == site.url("/quay.html")

            again = http.post(f"/v1/vector_stores/{vs}/web_pages", json={"url": site.url("/quay.html")}).json()
            assert [p["status"] for p in again["web_pages"]] == ["unchanged"]
            assert again["status"] == "completed" and again["file_counts"]["completed"] == 1

            site.html("/quay.html", page("Quay", "The quay is closed for repairs this winter."))
            changed = http.post(f"/v1/vector_stores/{vs}/web_pages", json={"url": site.url("/quay.html")}).json()
            assert [p["status"] for p in changed["web_pages"]] == ["added"]
            assert wait_batch(http, vs, changed["id"])["status"] == "completed"
            names = [f.file_name for f in wb.store_files("web")]
            assert names.count(site.url("/quay.html")) == 1  # replaced, not kept twice

            for bad, param in (
                ({"url": "ftp://x.org/"}, "url"),
                ({"url": site.url("/"), "depth": 7}, "depth"),
                ({"url": site.url("/"), "max_pages": 0}, "max_pages"),
                ({}, "url"),
                ({"url": site.url("/"), "nope": 1}, None),
            ):
                r = http.post(f"/v1/vector_stores/{vs}/web_pages", json=bad)
                assert r.status_code == 400, (bad, r.text)
                if param:
                    assert r.json()["error"]["param"] == param
            r = http.post(f"/v1/vector_stores/{vs}/web_pages", json={"url": site.url("/missing.html")})
            assert r.status_code == 400 and "not found (HTTP 404)" in r.json()["error"]["message"]
    finally:
        system.close()


def test_web_pages_route_refuses_loopback_by_default(tmp_path, site: Site):
    site.html("/", page("Home", "Inside."))
    system, _wb, server = served(tmp_path)
    try:
        with server as base, httpx.Client(base_url=base, timeout=60) as http:
            vs = http.post("/v1/vector_stores", json={"name": "web"}).json()["id"]
            r = http.post(f"/v1/vector_stores/{vs}/web_pages", json={"url": site.url("/")})
            assert r.status_code == 400 and "loopback address" in r.json()["error"]["message"]
            assert site.requests == []
    finally:
        system.close()
