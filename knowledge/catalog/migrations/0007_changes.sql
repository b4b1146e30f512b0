-- 7: a version bumped by every committed write, for other processes to notice a change cheaply
-- (Catalog.change_token). On PostgreSQL triggers on every table bump it once per transaction, when
-- the transaction commits (a deferred constraint trigger: the row is locked only at commit, so two
-- writers cannot deadlock over it). DuckDB, one writing process at a time, has no triggers: its
-- token is the file's size and time, and it keeps the row at 0.
CREATE TABLE catalog_changes (
    id INTEGER PRIMARY KEY,
    version BIGINT NOT NULL
);
INSERT INTO catalog_changes VALUES (1, 0);
-- [postgresql]
CREATE FUNCTION catalog_changed() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF current_setting('knowledge.catalog_changed', true) IS DISTINCT FROM txid_current()::text THEN
        PERFORM set_config('knowledge.catalog_changed', txid_current()::text, true);
        UPDATE catalog_changes SET version = version + 1 WHERE id = 1;
    END IF;
    RETURN NULL;
END
$$;
DO $$
DECLARE t text;
BEGIN
    FOREACH t IN ARRAY ARRAY['templates', 'stores', 'store_files', 'llm_configs', 'chat_sessions',
                             'chat_messages', 'chat_attachments', 'llm_traces', 'eval_sets', 'eval_runs',
                             'store_file_names', 'synced_folders'] LOOP
        EXECUTE format('CREATE CONSTRAINT TRIGGER %I AFTER INSERT OR UPDATE OR DELETE ON %I'
                       ' DEFERRABLE INITIALLY DEFERRED FOR EACH ROW EXECUTE FUNCTION catalog_changed()',
                       t || '_changed', t);
    END LOOP;
END
$$;
-- [end]
