-- 14: where the files live (issue 39). One row (id 1): the file store's backend and non-secret
-- location as JSON (`location`); during a move its target (`moving_to`) and phase ('copying', then
-- 'switching' for the final pass; 'settled' otherwise); after a move the store moved from
-- (`previous`, kept until its old copies are deleted); the move's progress (JSON). Every process
-- reads the row (cached briefly) and uses the store it names (knowledge.service.filehome).
CREATE TABLE file_store_home (
    id INTEGER PRIMARY KEY CHECK (id = 1),
    location TEXT NOT NULL,
    moving_to TEXT,
    phase TEXT NOT NULL DEFAULT 'settled',
    previous TEXT,
    progress TEXT,
    updated TIMESTAMPTZ NOT NULL
);
-- The copies of a move verified in its target (SHA-256 read back): a re-run skips them.
CREATE TABLE file_store_copies (
    target TEXT NOT NULL,
    file_id TEXT NOT NULL,
    sha256 TEXT NOT NULL,
    verified TIMESTAMPTZ NOT NULL,
    PRIMARY KEY (target, file_id)
);
