-- 12: a store's own settings (issue 29): a description in words (shown to the chat model with the
-- store's name) and a default score threshold (the playground and chat use it when the person sets
-- none; NULL: the setting search.score_threshold). No row: neither is set.
CREATE TABLE store_settings (
    store TEXT PRIMARY KEY,
    description TEXT NOT NULL DEFAULT '',
    score_threshold DOUBLE,
    updated TIMESTAMPTZ NOT NULL
);
