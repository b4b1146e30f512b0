from __future__ import annotations

import pytest

from knowledge.catalog import Catalog
from knowledge.config import load_settings
from knowledge.errors import InvalidArgument
from knowledge.service.templates import DEFAULT_TEMPLATE, TemplateNotFound, TemplateRegistry, make_template


@pytest.fixture
def registry(tmp_path):
    settings = load_settings(data_dir=tmp_path, vector_store={"max_chunk_size_tokens": 200, "chunk_overlap_tokens": 20})
    cat = Catalog(settings.catalog_path)
    yield TemplateRegistry(settings, cat)
    cat.close()


def test_the_settings_form_the_default_template(registry):
    t = registry.get(DEFAULT_TEMPLATE)
    assert (t.backend, t.max_chunk_size_tokens, t.chunk_overlap_tokens, t.distance) == ("memory", 200, 20, "cosine")
    assert t.embedding_model == "sentence-transformers/all-MiniLM-L6-v2"
    assert [x.name for x in registry.list()] == [DEFAULT_TEMPLATE]


def test_save_get_list_delete(registry):
    registry.save(
        make_template(
            name="small chunks",
            embedding_model="fake",
            max_chunk_size_tokens=64,
            chunk_overlap_tokens=8,
            ingest_folder="/docs",
            ingest_glob="**/*.md",
        )
    )
    assert registry.names() == [DEFAULT_TEMPLATE, "small chunks"]
    assert registry.get("small chunks").ingest_glob == "**/*.md"
    with pytest.raises(InvalidArgument, match="used by"):
        registry.delete("small chunks", in_use_by=["notes"])
    registry.delete("small chunks")
    with pytest.raises(TemplateNotFound):
        registry.get("small chunks")


@pytest.mark.parametrize(
    "fields,fragment",
    [
        ({"name": "", "embedding_model": "m"}, "name"),
        ({"name": "../evil", "embedding_model": "m"}, "name"),
        ({"name": "t", "embedding_model": "m", "max_chunk_size_tokens": 0}, "max_chunk_size_tokens"),
        ({"name": "t", "embedding_model": "m", "chunk_overlap_tokens": 300, "max_chunk_size_tokens": 100}, "overlap"),
        ({"name": "t", "embedding_model": "m", "distance": "hamming"}, "distance"),
    ],
)
def test_invalid_templates_are_clear_errors(fields, fragment):
    with pytest.raises(InvalidArgument, match=fragment):
        make_template(**fields)


def test_the_default_template_is_read_only(registry):
    with pytest.raises(InvalidArgument, match="settings"):
        registry.save(make_template(name=DEFAULT_TEMPLATE, embedding_model="m"))
    with pytest.raises(InvalidArgument):
        registry.delete(DEFAULT_TEMPLATE)
