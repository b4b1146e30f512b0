-- 19: sources (issue 42): named, scheduled syncs of a store with a place a team's files live (an SMB
-- share, a WebDAV drive, a Git repository, an IMAP mailbox, an S3 bucket; knowledge/sources/).
-- `sources.secret` holds the credentials as a Fernet token (knowledge/sources/secrets.py), never in
-- clear; `config` the other settings. `next_run`: when the scheduler enqueues the next run (NULL: by
-- hand only). `marker`: the source's change token at the last complete run (nothing changed: no listing).
CREATE TABLE sources (
    id TEXT PRIMARY KEY,
    name TEXT NOT NULL UNIQUE,
    kind TEXT NOT NULL,
    store TEXT NOT NULL,
    config JSON NOT NULL,
    secret TEXT,
    include_globs JSON,
    exclude_globs JSON,
    max_bytes BIGINT,
    every_minutes INTEGER,
    paused BOOLEAN NOT NULL DEFAULT FALSE,
    readers JSON,
    next_run TIMESTAMPTZ,
    marker TEXT,
    created_by TEXT,
    created TIMESTAMPTZ NOT NULL,
    updated TIMESTAMPTZ NOT NULL
);
-- One row per run: `cause` 'hand' or 'schedule'; `status` queued, running, done, failed, cancelled;
-- `counts` {"added": n, ...}; `reason` why it failed, in words; `batch_id` its job's batch.
CREATE TABLE source_runs (
    id TEXT PRIMARY KEY,
    source_id TEXT NOT NULL,
    batch_id TEXT,
    cause TEXT NOT NULL,
    status TEXT NOT NULL,
    counts JSON,
    reason TEXT,
    worker TEXT,
    queued TIMESTAMPTZ NOT NULL,
    started TIMESTAMPTZ,
    finished TIMESTAMPTZ
);
CREATE INDEX source_runs_source ON source_runs (source_id, queued);
-- Each change a run made or tried, with its outcome in words.
CREATE TABLE source_run_items (
    run_id TEXT NOT NULL,
    seq INTEGER NOT NULL,
    action TEXT NOT NULL,
    path TEXT NOT NULL,
    old_path TEXT,
    ok BOOLEAN NOT NULL,
    message TEXT NOT NULL,
    chunks INTEGER,
    PRIMARY KEY (run_id, seq)
);
-- What the source put in the store, per path: the version and content key it had when read, and the
-- SHA-256 of its bytes (a file whose version moved but whose bytes did not is not ingested again).
CREATE TABLE source_entries (
    source_id TEXT NOT NULL,
    path TEXT NOT NULL,
    version TEXT NOT NULL,
    content_key TEXT,
    sha256 TEXT,
    PRIMARY KEY (source_id, path)
);
