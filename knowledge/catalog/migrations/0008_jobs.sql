-- 8: durable ingestion jobs (issue 26): a batch of files for one store, and one job row per file,
-- claimed by workers (any process, any machine that reaches the catalog and the file store).
-- Runs on DuckDB and on PostgreSQL: standard types only, times on the database's clock (now()).
CREATE TABLE ingest_batches (
    id TEXT PRIMARY KEY,
    store TEXT NOT NULL,
    template TEXT,
    options JSON,
    notes JSON,
    cancel_requested BOOLEAN NOT NULL DEFAULT FALSE,
    created_by TEXT,
    created TIMESTAMPTZ NOT NULL
);
CREATE INDEX ingest_batches_store ON ingest_batches (store, created);
CREATE TABLE ingest_jobs (
    id TEXT PRIMARY KEY,
    batch_id TEXT NOT NULL,
    seq INTEGER NOT NULL,
    store TEXT NOT NULL,
    name TEXT NOT NULL,
    source_kind TEXT NOT NULL,
    source TEXT NOT NULL,
    host TEXT,
    pinned TEXT,
    own_file BOOLEAN NOT NULL DEFAULT FALSE,
    size BIGINT,
    status TEXT NOT NULL,
    attempts INTEGER NOT NULL DEFAULT 0,
    max_attempts INTEGER NOT NULL DEFAULT 3,
    worker TEXT,
    lease_seconds DOUBLE PRECISION,
    heartbeat TIMESTAMPTZ,
    stage TEXT NOT NULL DEFAULT 'waiting',
    fraction DOUBLE PRECISION NOT NULL DEFAULT 0,
    stage_since TIMESTAMPTZ,
    stage_start_fraction DOUBLE PRECISION NOT NULL DEFAULT 0,
    queued TIMESTAMPTZ NOT NULL,
    started TIMESTAMPTZ,
    finished TIMESTAMPTZ,
    reason TEXT,
    error TEXT,
    result JSON
);
CREATE INDEX ingest_jobs_batch ON ingest_jobs (batch_id, seq);
