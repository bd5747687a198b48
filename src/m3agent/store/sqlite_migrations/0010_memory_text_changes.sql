-- m3agent memory schema, version 10: a log of memory text changes, as memory_tombstones logs deletions.
-- The in-process keyword index (m3agent.store.keyword_index) covers memories with id <= its watermark
-- as they were at its sync; a memory whose text changes since (an entity merge rewrites its tags, a
-- deleted entity is unnamed) is found here and read again. FTS5 stays the keyword index of the file:
-- this log is derived, pruned by compact() once the process's index covers it.
CREATE TABLE memory_text_changes (
    seq       INTEGER PRIMARY KEY AUTOINCREMENT,
    memory_id INTEGER NOT NULL
);
CREATE TRIGGER memories_text_changed AFTER UPDATE OF text ON memories WHEN NEW.text IS NOT OLD.text
BEGIN
    INSERT INTO memory_text_changes (memory_id) VALUES (NEW.id);
END;
