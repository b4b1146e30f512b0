-- 6: the names of a store's files (one stored content may carry several: the same bytes uploaded as
-- a.pdf and b.pdf are indexed once, under both names; knowledge/indexing.py), each with its origin --
-- '' by hand, else the synced folder it came from and the file's size and mtime at the last sync
-- (knowledge/sync.py) -- and the folders each store keeps in sync
CREATE TABLE store_file_names (
    store TEXT NOT NULL,
    file_id TEXT NOT NULL,
    name TEXT NOT NULL,
    folder TEXT NOT NULL DEFAULT '',
    size BIGINT,
    mtime_ns BIGINT,
    created TIMESTAMPTZ NOT NULL,
    PRIMARY KEY (store, file_id, name, folder)
);
INSERT INTO store_file_names (store, file_id, name, folder, created)
    SELECT store, file_id, file_name, '', created FROM store_files;
CREATE TABLE synced_folders (
    store TEXT NOT NULL,
    folder TEXT NOT NULL,
    pattern TEXT NOT NULL,
    last_sync TIMESTAMPTZ,
    last_plan JSON,
    created TIMESTAMPTZ NOT NULL,
    PRIMARY KEY (store, folder)
);
