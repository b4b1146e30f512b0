-- 4: retrieval evaluation: question sets and the runs of a store on a set (knowledge/evaluation.py)
CREATE TABLE eval_sets (
    name TEXT PRIMARY KEY,
    format TEXT NOT NULL,
    questions JSON NOT NULL,
    created TIMESTAMPTZ NOT NULL,
    updated TIMESTAMPTZ NOT NULL
);
CREATE TABLE eval_runs (
    id TEXT PRIMARY KEY,
    set_name TEXT NOT NULL,
    set_sha256 TEXT NOT NULL,
    store TEXT NOT NULL,
    mode TEXT NOT NULL,
    k INTEGER NOT NULL,
    template TEXT,
    embedding_model TEXT,
    chunking JSON,
    search JSON,
    metrics JSON NOT NULL,
    questions JSON NOT NULL,
    started TIMESTAMPTZ NOT NULL,
    seconds DOUBLE
);
