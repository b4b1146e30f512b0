"""The File details editor's model (knowledge.pagemodels.details): rows <-> typed attributes with the
API's limits in words, chat's sidebar filter lines, and who may read the file (the choice, the pick
list, the readers saved)."""

from __future__ import annotations

import pytest

from knowledge.errors import InvalidArgument
from knowledge.pagemodels.details import (
    EVERYONE_CHOICE,
    ONLY_CHOICE,
    attribute_filter,
    attributes_of,
    choice_of,
    filter_text,
    reader_label,
    reader_options,
    readers_of,
    rows_of,
    typed,
)


def test_rows_of_saved_attributes_split_out_the_title_and_type_each_value():
    title, rows = rows_of({"title": "Guide", "year": 2024, "draft": True, "team": "ops", "score": 2.5})
    assert title == "Guide"
    assert rows == [
        {"key": "draft", "type": "true/false", "value": "true"},
        {"key": "score", "type": "number", "value": "2.5"},
        {"key": "team", "type": "text", "value": "ops"},
        {"key": "year", "type": "number", "value": "2024"},
    ]
    assert rows_of({}) == ("", [])


def test_rows_round_trip_to_the_same_attributes():
    saved = {"title": "Guide", "year": 2024, "draft": True, "team": "ops", "score": 2.5, "code": "007"}
    title, rows = rows_of(saved)
    assert attributes_of(title, rows) == saved  # "007" stays text: the row says text


@pytest.mark.parametrize(
    ("kind", "value", "expected"),
    [
        ("number", " 3 ", 3),
        ("number", "2.5", 2.5),
        ("number", "1e3", 1000.0),
        ("number", "-4", -4),
        ("true/false", "Yes", True),
        ("true/false", "off", False),
        ("text", " spaced ", " spaced "),
        (None, "plain", "plain"),
    ],
)
def test_values_follow_their_row_type(kind, value, expected):
    got = typed("k", kind, value)
    assert got == expected and type(got) is type(expected)


@pytest.mark.parametrize(
    ("title", "rows", "words"),
    [
        ("", [{"key": "year", "type": "number", "value": "twenty"}], "'year' should be a number"),
        ("", [{"key": "n", "type": "number", "value": "inf"}], "finite number"),
        ("", [{"key": "ok", "type": "true/false", "value": "maybe"}], "true or false"),
        ("", [{"key": "", "type": "text", "value": "orphan"}], "Row 1 has a value but no key"),
        ("", [{"key": "a", "value": "1"}, {"key": " a ", "value": "2"}], "'a' is given twice"),
        ("T", [{"key": "title", "value": "x"}], "title has its own field"),
        ("", [{"key": "k" * 65, "value": "x"}], "1-64 characters"),
        ("", [{"key": "long", "value": "x" * 513}], "at most 512"),
        ("T", [{"key": f"k{i}", "value": "x"} for i in range(16)], "at most 16 keys"),
        ("", [{"key": "k", "type": "list", "value": "x"}], "should be one of text, number, true/false"),
    ],
)
def test_bad_details_are_refused_in_words(title, rows, words):
    with pytest.raises(InvalidArgument, match=words):
        attributes_of(title, rows)


def test_empty_added_rows_and_a_blank_title_are_nothing():
    assert attributes_of("  ", [{"key": "", "type": "text", "value": ""}, {"key": " ", "value": None}]) == {}
    assert attributes_of("", [{"key": f"k{i}", "value": "x"} for i in range(16)])  # 16 keys: the limit


def test_chat_filter_lines_are_attribute_fields_and_read_back():
    where = attribute_filter('team = ops\nyear = 2024\n# a comment\nattr_draft = false\nname = "007"')
    assert where == {"attr_team": "ops", "attr_year": 2024, "attr_draft": False, "attr_name": "007"}
    assert attribute_filter(filter_text(where)) == where
    assert attribute_filter("") == {} and filter_text({}) == ""
    with pytest.raises(InvalidArgument, match="field = value"):
        attribute_filter("just words")


def test_who_may_read_a_file_is_everyone_or_only_those_picked():
    assert choice_of(None) == EVERYONE_CHOICE and choice_of(("group:hr",)) == ONLY_CHOICE
    assert readers_of(EVERYONE_CHOICE, ["group:hr"]) is None  # the store's sharing: what was picked is let go
    assert readers_of(ONLY_CHOICE, ["group:hr", "user:ana", "group:hr"]) == ("group:hr", "user:ana")
    for nobody in ([], None):
        with pytest.raises(InvalidArgument, match="Choose at least one person or group"):
            readers_of(ONLY_CHOICE, nobody)  # saving it would open the file to everyone
    with pytest.raises(InvalidArgument, match="'user:<name>', 'group:<name>'"):
        readers_of(ONLY_CHOICE, ["ana"])
    with pytest.raises(InvalidArgument, match="Who may read the file is one of"):
        readers_of("some", ["group:hr"])


def test_the_pick_list_offers_groups_then_people_and_keeps_a_saved_reader_gone_since():
    options = reader_options(["bo", "ana"], ["staff", "hr"], ["user:gone", "group:hr"])
    assert options == ["group:hr", "group:staff", "user:ana", "user:bo", "user:gone"]
    names = {"ana": "Ana Lima", "bo": "bo"}
    assert [reader_label(o, names) for o in options] == [
        "👥 group hr",
        "👥 group staff",
        "👤 Ana Lima (ana)",
        "👤 bo",
        "👤 gone",
    ]
