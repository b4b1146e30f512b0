-- 2: LLM configs (with the built-in `embeddings` and `offline` ones), chat sessions, messages,
-- attachments, and the LLM call trace
CREATE TABLE llm_configs (
    name TEXT PRIMARY KEY,
    spec JSON NOT NULL,
    created TIMESTAMPTZ NOT NULL,
    updated TIMESTAMPTZ NOT NULL
);
INSERT INTO llm_configs VALUES
    ('embeddings', '{"name": "embeddings", "type": "EMBEDDING", "provider": "bundled"}', now(), now()),
    ('offline', '{"name": "offline", "type": "CHAT", "provider": "offline"}', now(), now());
CREATE TABLE chat_sessions (
    id TEXT PRIMARY KEY,
    title TEXT NOT NULL,
    config TEXT,
    store TEXT NOT NULL,
    tools JSON NOT NULL,
    pending JSON NOT NULL,
    created TIMESTAMPTZ NOT NULL,
    updated TIMESTAMPTZ NOT NULL
);
CREATE TABLE chat_messages (
    session_id TEXT NOT NULL,
    seq INTEGER NOT NULL,
    role TEXT NOT NULL,
    parts JSON NOT NULL,
    meta JSON NOT NULL,
    created TIMESTAMPTZ NOT NULL,
    PRIMARY KEY (session_id, seq)
);
CREATE TABLE chat_attachments (
    session_id TEXT NOT NULL,
    file_id TEXT NOT NULL,
    name TEXT NOT NULL,
    media_type TEXT NOT NULL,
    kind TEXT NOT NULL,
    size BIGINT,
    pages INTEGER,
    attached TIMESTAMPTZ NOT NULL,
    PRIMARY KEY (session_id, file_id)
);
CREATE SEQUENCE llm_trace_ids;
CREATE TABLE llm_traces (
    id BIGINT PRIMARY KEY DEFAULT nextval('llm_trace_ids'),
    session_id TEXT,
    config TEXT NOT NULL,
    provider TEXT NOT NULL,
    model TEXT,
    request JSON NOT NULL,
    response JSON,
    error TEXT,
    started TIMESTAMPTZ NOT NULL,
    seconds DOUBLE
);
