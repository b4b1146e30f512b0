from __future__ import annotations

from pathlib import Path

import pytest

from knowledge.config import load_settings, settings_file_path
from knowledge.errors import ConfigError


def test_defaults_match_the_product_settings():
    s = load_settings()
    assert s.vector_store.backend == "memory"
    assert s.vector_store.embedding_config == "embeddings"
    assert s.vector_store.idle_seconds == 600
    assert s.vector_store.max_chunks_per_store == 100_000
    assert s.file_store.backend == "filesystem"
    assert s.vector_store_dir == s.data_root / "vector-stores"
    assert s.file_store_dir == s.data_root / "files"
    assert s.models_dir == s.data_root / "models"


def test_data_dir_roots_every_relative_path(tmp_path, monkeypatch):
    monkeypatch.setenv("KNOWLEDGE_DATA_DIR", str(tmp_path / "elsewhere"))
    s = load_settings()
    assert s.vector_store_dir == tmp_path / "elsewhere" / "vector-stores"
    monkeypatch.setenv("KNOWLEDGE_VECTOR_STORE__DIR", str(tmp_path / "abs"))
    assert load_settings().vector_store_dir == tmp_path / "abs"


def test_environment_overrides_nested_keys(monkeypatch):
    monkeypatch.setenv("KNOWLEDGE_VECTOR_STORE__BACKEND", "pgvector")
    monkeypatch.setenv("KNOWLEDGE_VECTOR_STORE__IDLE_SECONDS", "30")
    monkeypatch.setenv("KNOWLEDGE_VECTOR_STORE__PASSWORD", "s3cret")
    s = load_settings()
    assert s.vector_store.backend == "pgvector"
    assert s.vector_store.idle_seconds == 30.0
    assert s.vector_store.password.get_secret_value() == "s3cret"
    assert "s3cret" not in repr(s)


def test_settings_file_then_environment_then_arguments(tmp_path, monkeypatch):
    f = tmp_path / "settings.toml"
    f.write_text('[vector_store]\nbackend = "qdrant"\nmax_chunks_per_store = 500\n[embeddings]\nbatch_size = 16\n')
    monkeypatch.setenv("KNOWLEDGE_SETTINGS_FILE", str(f))
    s = load_settings()
    assert (s.vector_store.backend, s.vector_store.max_chunks_per_store, s.embeddings.batch_size) == ("qdrant", 500, 16)
    monkeypatch.setenv("KNOWLEDGE_VECTOR_STORE__MAX_CHUNKS_PER_STORE", "700")
    assert load_settings().vector_store.max_chunks_per_store == 700
    assert load_settings(vector_store={"max_chunks_per_store": 9}).vector_store.max_chunks_per_store == 9


def test_settings_file_in_the_data_dir_is_found(tmp_path, monkeypatch):
    monkeypatch.setenv("KNOWLEDGE_DATA_DIR", str(tmp_path))
    (tmp_path / "settings.toml").write_text("[vector_store]\nidle_seconds = 12\n")
    assert settings_file_path() == tmp_path / "settings.toml"
    assert load_settings().vector_store.idle_seconds == 12


@pytest.mark.parametrize(
    "env,fragment",
    [
        ({"KNOWLEDGE_VECTOR_STORE__IDLE_SECONDS": "soon"}, "vector_store.idle_seconds"),
        ({"KNOWLEDGE_VECTOR_STORE__MAX_CHUNKS_PER_STORE": "0"}, "max_chunks_per_store"),
        ({"KNOWLEDGE_VECTOR_STORE__DISTANCE": "hamming"}, "vector_store.distance"),
        ({"KNOWLEDGE_VECTOR_STORE_BACKEND": "pgvector"}, "double underscore"),
        ({"KNOWLEDGE_SETTINGS_FILE": "/nonexistent/k.toml"}, "not a file"),
    ],
)
def test_invalid_values_are_clear_errors(monkeypatch, env, fragment):
    for k, v in env.items():
        monkeypatch.setenv(k, v)
    with pytest.raises(ConfigError) as err:
        load_settings()
    assert fragment in str(err.value)


def test_bad_settings_files_are_clear_errors(tmp_path, monkeypatch):
    f = tmp_path / "k.toml"
    monkeypatch.setenv("KNOWLEDGE_SETTINGS_FILE", str(f))
    f.write_text("[vector_store\nbackend = 1")
    with pytest.raises(ConfigError, match="not valid TOML"):
        load_settings()
    f.write_text("[vector_store]\nbakend = 'memory'\n")
    with pytest.raises(ConfigError, match=r"vector_store\.bakend"):
        load_settings()


def test_plugin_options_pass_through(monkeypatch):
    monkeypatch.setenv("KNOWLEDGE_VECTOR_STORE__OPTIONS", '{"shards": 2}')
    assert load_settings().vector_store.options == {"shards": 2}


def test_an_empty_variable_counts_as_unset(tmp_path, monkeypatch):
    """``KNOWLEDGE_DATA_DIR=`` (empty) gives the default ./data, not the working directory itself."""
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("KNOWLEDGE_DATA_DIR", "")
    monkeypatch.setenv("KNOWLEDGE_APP_PASSWORD", "")
    s = load_settings()
    assert s.data_root == tmp_path / "data" and s.catalog_path.parent == tmp_path / "data"
    assert s.app_password is None


@pytest.mark.parametrize(
    "value, dirs",
    [
        ("/srv/docs", ["/srv/docs"]),
        ("/srv/docs:/home/me/notes", ["/srv/docs", "/home/me/notes"]),  # as PATH is written
        ('["/srv/docs", "/home/me/notes"]', ["/srv/docs", "/home/me/notes"]),  # a JSON list
        (" /srv/docs : ", ["/srv/docs"]),
    ],
)
def test_list_settings_take_a_plain_variable(monkeypatch, value, dirs):
    monkeypatch.setenv("KNOWLEDGE_INGEST__ALLOWED_DIRS", value)
    monkeypatch.setenv("KNOWLEDGE_CHAT__ALLOWED_DIRS", value)
    monkeypatch.setenv("KNOWLEDGE_MCP__ALLOWED_DIRS", value)
    monkeypatch.setenv("KNOWLEDGE_API__CORS_ORIGINS", "http://localhost:3000, https://app.example")
    monkeypatch.setenv("KNOWLEDGE_CHAT__DEFAULT_STORES", "rust,notes")
    s = load_settings()
    for got in (s.ingest.allowed_dirs, s.chat.allowed_dirs, s.mcp.allowed_dirs):
        assert got == [Path(d) for d in dirs]
    assert s.api.cors_origins == ["http://localhost:3000", "https://app.example"]
    assert s.chat.default_stores == ["rust", "notes"]


def test_a_variable_that_does_not_parse_is_a_config_error(monkeypatch):
    monkeypatch.setenv("KNOWLEDGE_VECTOR_STORE__OPTIONS", "{not json")
    with pytest.raises(ConfigError, match="vector_store"):
        load_settings()
    monkeypatch.delenv("KNOWLEDGE_VECTOR_STORE__OPTIONS")
    monkeypatch.setenv("KNOWLEDGE_INGEST__ALLOWED_DIRS", "[not json")
    with pytest.raises(ConfigError, match=r"ingest\.allowed_dirs"):
        load_settings()
