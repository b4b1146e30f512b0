-- 21: a batch the local admin queued into a new store (before accounts existed) recorded the store as
-- owned by "local", a reserved name no account can have: once accounts were turned on, such stores
-- were listed as "owned by local" and counted as nobody's quota. A store made before accounts existed
-- has no owner row (it is the admins'); these get the same.
DELETE FROM store_owners WHERE owner = 'local';
