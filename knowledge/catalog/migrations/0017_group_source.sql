-- 17: where a group membership comes from (issue 41). `source` NULL (or empty) = made by hand (People
-- page, CLI, REST); otherwise the provider that keeps it: `ldap`, `oidc:<issuer>`, `scim`. A provider's
-- memberships are set at each sign-in (knowledge.people.accounts.Accounts.set_groups_from) and are not
-- editable by hand. group_members keeps its change trigger (migration 10).
ALTER TABLE group_members ADD COLUMN source TEXT;
