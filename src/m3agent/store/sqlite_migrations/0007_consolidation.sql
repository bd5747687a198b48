-- m3agent memory schema, version 7: semantic memory consolidation.
-- consolidated_clips records each clip whose episodic memories a model has read
-- and turned into semantic memories (m3agent.memorize.consolidate), so the step
-- resumes after the last consolidated clip; notes hold what was refused (JSON list).
-- memory_sources is the provenance of a consolidated fact: the episodic memories
-- it was drawn from (a reinforced fact gains the sources of each confirmation).

CREATE TABLE consolidated_clips (
    video_id   TEXT NOT NULL,
    clip_index INTEGER NOT NULL,
    model      TEXT NOT NULL DEFAULT '',
    notes      TEXT NOT NULL DEFAULT '[]',
    seconds    REAL NOT NULL DEFAULT 0,
    created_at TEXT NOT NULL,
    PRIMARY KEY (video_id, clip_index),
    FOREIGN KEY (video_id, clip_index) REFERENCES clips (video_id, clip_index) ON DELETE CASCADE
) WITHOUT ROWID;

CREATE TABLE memory_sources (
    memory_id  INTEGER NOT NULL REFERENCES memories (id) ON DELETE CASCADE,
    source_id  INTEGER NOT NULL REFERENCES memories (id) ON DELETE CASCADE,
    clip_index INTEGER NOT NULL,
    PRIMARY KEY (memory_id, source_id)
) WITHOUT ROWID;
CREATE INDEX memory_sources_by_source ON memory_sources (source_id);
