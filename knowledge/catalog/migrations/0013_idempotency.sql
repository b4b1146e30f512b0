-- 13 (issue 39): the REST API's idempotency keys, so a POST retried with the same Idempotency-Key
-- (after a timeout, through any API process on the catalog) answers the first response instead of
-- creating a second record. One row per caller (owner: the account's username, '' without
-- accounts) and key: the request's fingerprint (method, path, parameters), a claim token (whose
-- request is running it), and once it ended the response's status, body and headers. Kept 24 hours.
CREATE TABLE api_idempotency (
    owner TEXT NOT NULL,
    idem_key TEXT NOT NULL,
    fingerprint TEXT NOT NULL,
    token TEXT NOT NULL,
    status INTEGER,
    body TEXT,
    headers JSON,
    created TIMESTAMPTZ NOT NULL,
    PRIMARY KEY (owner, idem_key)
);
