-- 20: quotas and rate limits (issue 44). `quota_limits`: a limit an admin set for one person
-- (scope 'user', name = username), group ('group') or store ('store') on one measure ('bytes',
-- 'files', 'chunks', 'requests_per_minute'); a scope/name/measure without a row has the setting's
-- limit (quotas.*). `rate_windows`: requests counted per key and minute when the catalog is shared
-- (PostgreSQL), so that every API process counts the same requests; old windows are deleted as new
-- ones are counted. Neither table marks the catalog changed (no trigger): nothing is cached from them.
CREATE TABLE quota_limits (
    scope TEXT NOT NULL,
    name TEXT NOT NULL,
    measure TEXT NOT NULL,
    amount BIGINT NOT NULL,
    updated TIMESTAMPTZ NOT NULL,
    PRIMARY KEY (scope, name, measure)
);
CREATE TABLE rate_windows (
    bucket TEXT NOT NULL,
    window_start BIGINT NOT NULL,
    requests INTEGER NOT NULL,
    PRIMARY KEY (bucket, window_start)
);
