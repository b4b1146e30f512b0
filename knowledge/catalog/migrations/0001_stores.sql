-- 1: templates, stores, store files
CREATE TABLE templates (
    name TEXT PRIMARY KEY,
    spec JSON NOT NULL,
    created TIMESTAMPTZ NOT NULL,
    updated TIMESTAMPTZ NOT NULL
);
CREATE TABLE stores (
    name TEXT PRIMARY KEY,
    template TEXT NOT NULL,
    backend TEXT NOT NULL,
    collection TEXT NOT NULL,
    embedding_model TEXT NOT NULL,
    dimension INTEGER,
    distance TEXT NOT NULL,
    created TIMESTAMPTZ NOT NULL,
    updated TIMESTAMPTZ NOT NULL
);
CREATE TABLE store_files (
    store TEXT NOT NULL,
    file_id TEXT NOT NULL,
    file_name TEXT NOT NULL,
    sha256 TEXT,
    size BIGINT,
    status TEXT NOT NULL,
    reason TEXT,
    chunks INTEGER NOT NULL DEFAULT 0,
    pages INTEGER,
    warnings JSON,
    read_seconds DOUBLE,
    embed_seconds DOUBLE,
    total_seconds DOUBLE,
    created TIMESTAMPTZ NOT NULL,
    updated TIMESTAMPTZ NOT NULL,
    PRIMARY KEY (store, file_id)
);
