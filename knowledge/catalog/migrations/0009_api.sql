-- 9: the REST API's own objects (issue 26), so every `knowledge serve` process on one catalog
-- answers for every file and batch: each vector store's API fields (metadata, expires_after,
-- chunking_strategy, description; until now <data>/api/vector_stores.json), each file added to a
-- store through the API (its ingest job: batch and place), and each file batch (vsfb_...) with the
-- ingest batches it was split into (one per distinct attributes + chunking).
CREATE TABLE api_vector_stores (
    store TEXT PRIMARY KEY,
    meta JSON NOT NULL,
    updated TIMESTAMPTZ NOT NULL
);
CREATE TABLE api_store_files (
    store TEXT NOT NULL,
    file_id TEXT NOT NULL,
    batch_id TEXT NOT NULL,
    seq INTEGER NOT NULL,
    created TIMESTAMPTZ NOT NULL,
    PRIMARY KEY (store, file_id)
);
CREATE TABLE api_file_batches (
    id TEXT PRIMARY KEY,
    store TEXT NOT NULL,
    file_ids JSON NOT NULL,
    created TIMESTAMPTZ NOT NULL
);
CREATE TABLE api_file_batch_parts (
    file_batch TEXT NOT NULL,
    batch_id TEXT NOT NULL,
    PRIMARY KEY (file_batch, batch_id)
);
-- [postgresql]
DO $$
DECLARE t text;
BEGIN
    FOREACH t IN ARRAY ARRAY['api_vector_stores', 'api_store_files', 'api_file_batches',
                             'api_file_batch_parts'] LOOP
        EXECUTE format('CREATE CONSTRAINT TRIGGER %I AFTER INSERT OR UPDATE OR DELETE ON %I'
                       ' DEFERRABLE INITIALLY DEFERRED FOR EACH ROW EXECUTE FUNCTION catalog_changed()',
                       t || '_changed', t);
    END LOOP;
END
$$;
-- [end]
