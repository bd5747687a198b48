-- m3agent memory schema, version 8: what consolidation changed in memories it did not write
-- (as sqlite_migrations/0008): the weight a unit added or took and the last confirmed clip
-- before and after, so `m3agent consolidate --redo` takes the changes back.

CREATE TABLE consolidation_changes (
    memory_id    BIGINT NOT NULL REFERENCES memories (id) ON DELETE CASCADE,
    video_id     TEXT NOT NULL,
    clip_index   INTEGER NOT NULL,
    weight_delta DOUBLE PRECISION NOT NULL DEFAULT 0,
    last_before  INTEGER,
    last_after   INTEGER,
    PRIMARY KEY (memory_id, video_id, clip_index),
    FOREIGN KEY (video_id, clip_index) REFERENCES clips (video_id, clip_index) ON DELETE CASCADE
);
CREATE INDEX consolidation_changes_by_video ON consolidation_changes (video_id, clip_index);
