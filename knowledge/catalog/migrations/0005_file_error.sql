-- 5: the class of the error that failed a file (``PasswordRequired``, ...): callers ask its identity,
-- not its message; NULL for files that did not fail and for failures recorded before this version
ALTER TABLE store_files ADD COLUMN error TEXT;
