-- 18: access per document inside a store (issue 41). `store_files.readers`: NULL = the file inherits
-- the store's sharing; otherwise a JSON array of principals ("user:<username>", "group:<name>") who
-- may read it besides the store's owners (knowledge.people.policy.Policy.reads). `store_access`: the
-- stores whose searches filter chunks by their `readers` payload field -- a row is written once every
-- chunk of the store carries that field (knowledge.service.indexing.Indexer.set_file_readers), and
-- stays (a store that restricted a file once keeps filtering: cheap, and never wrong).
ALTER TABLE store_files ADD COLUMN readers TEXT;
CREATE TABLE store_access (
    store TEXT PRIMARY KEY,
    since TIMESTAMPTZ NOT NULL
);
