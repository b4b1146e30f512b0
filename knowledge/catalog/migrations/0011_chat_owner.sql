-- 11: whose a chat session is (issue 28): the username of the account that started it. NULL: a
-- session started without accounts (or by the local admin, the CLI); it belongs to the admins.
ALTER TABLE chat_sessions ADD COLUMN owner TEXT;
