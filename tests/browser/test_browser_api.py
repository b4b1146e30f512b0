"""A web page of another site cannot drive the local REST API (issue 24), tried in a real Chromium:
an attacker page served by a second local HTTP server (http://localhost:<other port>, another site
than http://127.0.0.1:<api port>) sends each request a page can send, and an uploaded HTML file
opened from the API's origin is a download, not a page whose script runs."""

from __future__ import annotations

import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import httpx
import pytest

from knowledge.config import load_settings
from knowledge.embeddings.fake import HashEmbedder
from knowledge.server.app import create_app
from knowledge.system import System
from tests.helpers.api import Served, free_port

pytestmark = pytest.mark.browser

ATTACK = """<!doctype html><html><body>
<form id="upload" action="API/v1/files" method="POST" enctype="multipart/form-data" target="sink1">
  <input type="hidden" name="purpose" value="assistants"><input type="file" name="file" id="file">
</form>
<form id="plainform" action="API/v1/vector_stores" method="POST" enctype="text/plain" target="sink2">
  <input type="hidden" name='{"name": "pwned-form", "x": "' value='"}'>
</form>
<iframe name="sink1"></iframe><iframe name="sink2"></iframe>
<script>
(async () => {
  const api = "API", out = {};
  try {  // a "simple" request: no preflight, the response is opaque but the server acts on it
    await fetch(api + "/v1/vector_stores", {method: "POST", mode: "no-cors",
      headers: {"Content-Type": "text/plain"}, body: JSON.stringify({name: "pwned-plain"})});
    out.plain = "sent";
  } catch (e) { out.plain = "failed"; }
  try { const r = await fetch(api + "/v1/files"); out.read = "read " + r.status + " " + await r.text(); }
  catch (e) { out.read = "blocked"; }
  try {
    await fetch(api + "/v1/vector_stores", {method: "POST", headers: {"Content-Type": "application/json"},
      body: JSON.stringify({name: "pwned-json"})});
    out.json = "sent";
  } catch (e) { out.json = "blocked"; }
  window.__results = out;
  const files = new DataTransfer();
  files.items.add(new File(["# Planted\\n\\nBy a page of another site.\\n"], "planted.md"));
  document.getElementById("file").files = files.files;
  document.getElementById("upload").submit();
  document.getElementById("plainform").submit();
})();
</script></body></html>"""

PLANTED_PAGE = b"""<!doctype html><html><head><title>not run</title></head><body><script>
document.title = "ran";
fetch("/v1/files").then(r => r.json()).then(j => j.data.forEach(f =>
  fetch("/v1/files/" + f.id, {method: "DELETE"})));
</script></body></html>"""


class _Attacker:
    """A second local HTTP server on another port: one page, the attack."""

    def __init__(self, page: str) -> None:
        body = page.encode()

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                self.send_response(200)
                self.send_header("Content-Type", "text/html; charset=utf-8")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, *args: object) -> None:
                pass

        self.port = free_port()
        self.server = ThreadingHTTPServer(("127.0.0.1", self.port), Handler)
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    def __enter__(self) -> str:
        self.thread.start()
        return f"http://localhost:{self.port}/"

    def __exit__(self, *exc: object) -> None:
        self.server.shutdown()
        self.server.server_close()


@pytest.fixture
def api(tmp_path):
    system = System(
        load_settings(data_dir=tmp_path / "data"), embedder_factory=lambda model: HashEmbedder(dimension=64, max_tokens=256)
    )
    with Served(create_app(system)) as base:
        yield base
    system.close()


def test_a_page_of_another_site_creates_uploads_and_reads_nothing(browser, api):
    with _Attacker(ATTACK.replace("API", api)) as attacker_url:
        page = browser.new_page()
        try:

            def form_post(path: str):
                return lambda r: r.url == api + path and r.request.method == "POST" and r.request.resource_type == "document"

            with (
                page.expect_response(form_post("/v1/files")) as upload,
                page.expect_response(form_post("/v1/vector_stores")) as plain_form,
            ):
                page.goto(attacker_url)
            assert upload.value.status == 403 and plain_form.value.status == 403
            page.wait_for_function("window.__results !== undefined")
            results = page.evaluate("window.__results")
        finally:
            page.close()
    assert results["read"] == "blocked" and results["json"] == "blocked", results
    # asked as the user's own client: nothing was created or uploaded
    assert httpx.get(api + "/v1/vector_stores").json()["data"] == []
    assert httpx.get(api + "/v1/files").json()["data"] == []


def test_an_uploaded_html_file_is_downloaded_not_run(browser, api):
    victim = httpx.post(
        api + "/v1/files", files={"file": ("victim.md", b"# Victim\n")}, data={"purpose": "assistants"}
    ).json()
    planted = httpx.post(
        api + "/v1/files", files={"file": ("planted.html", PLANTED_PAGE)}, data={"purpose": "assistants"}
    ).json()
    context = browser.new_context(accept_downloads=True)
    page = context.new_page()
    try:
        from playwright.sync_api import Error

        with page.expect_download() as download:
            try:
                page.goto(api + f"/v1/files/{planted['id']}/content")
            except Error as exc:  # a navigation that turns into a download is "aborted"
                assert "download" in str(exc).lower() or "ERR_ABORTED" in str(exc), exc
        assert download.value.suggested_filename == "planted.html"
        assert page.title() != "ran"
    finally:
        context.close()
    ids = {f["id"] for f in httpx.get(api + "/v1/files").json()["data"]}
    assert {victim["id"], planted["id"]} <= ids  # the script did not run: nothing deleted
