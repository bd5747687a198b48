-- m3agent memory schema, version 7: semantic memory consolidation (as sqlite_migrations/0007).
-- consolidated_clips records each clip whose episodic memories a model has turned into
-- semantic memories, so the step resumes; memory_sources is the provenance of a
-- consolidated fact: the episodic memories it was drawn from.

CREATE TABLE consolidated_clips (
    video_id   TEXT NOT NULL,
    clip_index INTEGER NOT NULL,
    model      TEXT NOT NULL DEFAULT '',
    notes      TEXT NOT NULL DEFAULT '[]',
    seconds    DOUBLE PRECISION NOT NULL DEFAULT 0,
    created_at TEXT NOT NULL,
    PRIMARY KEY (video_id, clip_index),
    FOREIGN KEY (video_id, clip_index) REFERENCES clips (video_id, clip_index) ON DELETE CASCADE
);

CREATE TABLE memory_sources (
    memory_id  BIGINT NOT NULL REFERENCES memories (id) ON DELETE CASCADE,
    source_id  BIGINT NOT NULL REFERENCES memories (id) ON DELETE CASCADE,
    clip_index INTEGER NOT NULL,
    PRIMARY KEY (memory_id, source_id)
);
CREATE INDEX memory_sources_by_source ON memory_sources (source_id);
