-- 10: people (issue 28): local accounts and their groups, each store's owner and who it is shared
-- with, per-user API keys, signed-in app sessions, invitations, and the audit trail. Secrets (session
-- tokens, API keys, invitation links) are kept as SHA-256 digests only; passwords as scrypt hashes.
CREATE TABLE users (
    username TEXT PRIMARY KEY,
    display_name TEXT NOT NULL,
    role TEXT NOT NULL,
    password_hash TEXT,
    email TEXT,
    created TIMESTAMPTZ NOT NULL,
    failures INTEGER NOT NULL DEFAULT 0,
    last_failure TIMESTAMPTZ,
    sso_issuer TEXT,
    sso_subject TEXT
);
CREATE TABLE user_groups (
    name TEXT PRIMARY KEY,
    created TIMESTAMPTZ NOT NULL
);
CREATE TABLE group_members (
    group_name TEXT NOT NULL,
    username TEXT NOT NULL,
    PRIMARY KEY (group_name, username)
);
CREATE TABLE store_owners (
    store TEXT PRIMARY KEY,
    owner TEXT NOT NULL
);
CREATE TABLE store_grants (
    store TEXT NOT NULL,
    kind TEXT NOT NULL,
    principal TEXT NOT NULL,
    level TEXT NOT NULL,
    PRIMARY KEY (store, kind, principal)
);
CREATE TABLE api_keys (
    id TEXT PRIMARY KEY,
    username TEXT NOT NULL,
    name TEXT NOT NULL,
    digest TEXT NOT NULL UNIQUE,
    hint TEXT NOT NULL,
    created TIMESTAMPTZ NOT NULL,
    last_used TIMESTAMPTZ,
    revoked TIMESTAMPTZ
);
CREATE TABLE app_sessions (
    digest TEXT PRIMARY KEY,
    username TEXT NOT NULL,
    created TIMESTAMPTZ NOT NULL,
    expires TIMESTAMPTZ NOT NULL
);
CREATE TABLE invites (
    digest TEXT PRIMARY KEY,
    role TEXT NOT NULL,
    created_by TEXT NOT NULL,
    created TIMESTAMPTZ NOT NULL,
    expires TIMESTAMPTZ NOT NULL,
    used_by TEXT
);
CREATE TABLE audit_events (
    id TEXT PRIMARY KEY,
    happened TIMESTAMPTZ NOT NULL,
    actor TEXT NOT NULL,
    action TEXT NOT NULL,
    store TEXT,
    target TEXT,
    detail JSON
);
CREATE INDEX audit_events_at ON audit_events (happened);
CREATE INDEX audit_events_store ON audit_events (store, happened);
-- [postgresql]
DO $$
DECLARE t text;
BEGIN
    FOREACH t IN ARRAY ARRAY['users', 'user_groups', 'group_members', 'store_owners', 'store_grants',
                             'api_keys', 'app_sessions', 'invites', 'audit_events'] LOOP
        EXECUTE format('CREATE CONSTRAINT TRIGGER %I AFTER INSERT OR UPDATE OR DELETE ON %I'
                       ' DEFERRABLE INITIALLY DEFERRED FOR EACH ROW EXECUTE FUNCTION catalog_changed()',
                       t || '_changed', t);
    END LOOP;
END
$$;
-- [end]
