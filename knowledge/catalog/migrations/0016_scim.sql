-- 17 (numbered 16 in this branch until the other part of issue 41 lands): SCIM 2.0 provisioning
-- (RFC 7643/7644). An account may be deactivated (`active` false: no sign-in, no API key, no app
-- session); a provisioned account and group keep the SCIM `id` the provider saw (`scim_id`, stable)
-- and the provider's `externalId`; `scim_user_name` is the SCIM userName as last given (the account's
-- username, its key, is set from it once, at creation). `scim_modified` is SCIM's meta.lastModified;
-- `scim_unset` (JSON list) names the optional attributes the provider left out or removed
-- ("displayName": the account shows its username; "active": the account is active).
-- `scim_tokens` holds the provisioning tokens' SHA-256 digests only (the token is shown once).
ALTER TABLE users ADD COLUMN active BOOLEAN NOT NULL DEFAULT TRUE;
ALTER TABLE users ADD COLUMN scim_id TEXT;
ALTER TABLE users ADD COLUMN external_id TEXT;
ALTER TABLE users ADD COLUMN scim_user_name TEXT;
ALTER TABLE users ADD COLUMN scim_modified TIMESTAMPTZ;
ALTER TABLE users ADD COLUMN scim_unset TEXT;
ALTER TABLE user_groups ADD COLUMN scim_id TEXT;
ALTER TABLE user_groups ADD COLUMN external_id TEXT;
ALTER TABLE user_groups ADD COLUMN scim_modified TIMESTAMPTZ;
CREATE TABLE scim_tokens (
    digest TEXT PRIMARY KEY,
    hint TEXT NOT NULL,
    created_by TEXT NOT NULL,
    created TIMESTAMPTZ NOT NULL
);
-- [postgresql]
CREATE CONSTRAINT TRIGGER scim_tokens_changed AFTER INSERT OR UPDATE OR DELETE ON scim_tokens
    DEFERRABLE INITIALLY DEFERRED FOR EACH ROW EXECUTE FUNCTION catalog_changed();
-- [end]
