-- 3: the stores a chat session searches besides its own attachments
ALTER TABLE chat_sessions ADD COLUMN stores JSON DEFAULT '[]';
UPDATE chat_sessions SET stores = '[]' WHERE stores IS NULL;
