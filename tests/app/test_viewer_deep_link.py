"""A deep link with a query (the viewer's ``view?store=…&file=…``) survives the sign-in: the cookie
hand-off (pages/_gate.py's ``_knowledge/session?next=``) sends the browser back to the path
*and* its query; anything but an app path with URL-safe characters still goes to ``/``."""

from __future__ import annotations

import urllib.parse

import pytest

from knowledge.pagemodels.viewer import viewer_url
from pages import _gate as webgate


def redirect(url: str) -> str:
    """Where the gate's cookie endpoint at ``url`` sends the browser (its Location header)."""
    parts = urllib.parse.urlsplit(url)
    endpoint = parts.path.strip("/")
    answer = webgate.cookie_answer(parts.query, False, endpoint == webgate.COOKIE_ENDPOINTS[0])
    return answer.headers["location"]


def test_the_viewer_link_comes_back_with_its_query_after_the_sign_in():
    link = "/" + viewer_url("Team docs", "file-0123", start=5, end=9, page=2).split("#")[0]
    url = webgate.cookie_url(webgate.HANDOFFS.issue("token", 60), link)
    assert redirect(url) == link


@pytest.mark.parametrize(
    "hostile",
    [
        "//evil.example/x",
        "https://evil.example/",
        "/view?x=1\r\nSet-Cookie: a=b",
        '/view?x="<script>',
        "/view#frag",
        "view?x=1",
    ],
)
def test_anything_else_goes_home(hostile):
    assert redirect(webgate.cookie_url(None, hostile)) == "/"
    query = urllib.parse.urlencode({"next": hostile})
    assert redirect(f"/_knowledge/sign-out?{query}") == "/"
