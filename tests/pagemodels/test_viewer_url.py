"""The viewer's URL: what every citation links to, read back by the viewer page."""

import pytest

from knowledge.errors import InvalidArgument
from knowledge.pagemodels.viewer import ViewerTarget, hit_viewer_url, parse_viewer_query, viewer_url
from knowledge.vectorstore.store import Hit


def _query(url: str) -> dict[str, str]:
    from urllib.parse import parse_qsl, urlsplit

    assert urlsplit(url).path == "view"
    return dict(parse_qsl(urlsplit(url).query))


def test_a_passage_link_round_trips_with_any_store_name():
    url = viewer_url("Ünïcode & co?=#", "file-abc", start=10, end=42, page=3)
    assert parse_viewer_query(_query(url)) == ViewerTarget("Ünïcode & co?=#", "file-abc", 10, 42, 3)
    assert parse_viewer_query(_query(viewer_url("s", "f"))) == ViewerTarget("s", "f")


def test_a_hit_links_to_its_characters_and_page():
    hit = Hit(
        id="p1", score=0.5, file_id="file-1", file_name="a.pdf", chunk_index=0, text="x", page=2, char_start=5, char_end=9
    )
    assert parse_viewer_query(_query(hit_viewer_url("docs", hit))) == ViewerTarget("docs", "file-1", 5, 9, 2)


@pytest.mark.parametrize(
    ("params", "words"),
    [
        ({"file": "f"}, "store= and file="),
        ({"store": "s", "file": "f", "start": "x", "end": "3"}, "start is not a whole number"),
        ({"store": "s", "file": "f", "start": "9", "end": "3"}, "ends (3) before it starts (9)"),
        ({"store": "s", "file": "f", "page": "0"}, "page must be at least 1"),
    ],
)
def test_a_broken_link_says_what_is_wrong(params, words):
    with pytest.raises(InvalidArgument) as err:
        parse_viewer_query(params)
    assert words in str(err.value)
