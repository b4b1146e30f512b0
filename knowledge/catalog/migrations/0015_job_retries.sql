-- 15: jobs that wait out the infrastructure (issue 39). An error of the infrastructure (the catalog,
-- the file store, the worker's disk, memory or model) never fails a file: its job goes back to
-- `queued` with `not_before` (the database's clock) set by an exponential back-off with jitter,
-- and `transient_attempts` counts those returns apart from `attempts` (the file's own).
-- DuckDB alters no table an index depends on: the index is dropped and made again around it.
DROP INDEX ingest_jobs_batch;
ALTER TABLE ingest_jobs ADD COLUMN transient_attempts INTEGER NOT NULL DEFAULT 0;
ALTER TABLE ingest_jobs ADD COLUMN not_before TIMESTAMPTZ;
CREATE INDEX ingest_jobs_batch ON ingest_jobs (batch_id, seq);
