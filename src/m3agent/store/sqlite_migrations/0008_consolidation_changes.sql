-- m3agent memory schema, version 8: what consolidation changed in memories it did not write.
-- A consolidation unit that reinforces or weakens an existing memory (a name the perception
-- writer stored, or a fact of an earlier unit) records the change with the unit's last clip:
-- the weight it added (negative: taken) and the memory's last confirmed clip before and after.
-- `m3agent consolidate --redo` takes these changes back (store.forget_consolidation), so a
-- memory that stays is as it was before the video was consolidated.

CREATE TABLE consolidation_changes (
    memory_id    INTEGER NOT NULL REFERENCES memories (id) ON DELETE CASCADE,
    video_id     TEXT NOT NULL,
    clip_index   INTEGER NOT NULL,
    weight_delta REAL NOT NULL DEFAULT 0,
    last_before  INTEGER,
    last_after   INTEGER,
    PRIMARY KEY (memory_id, video_id, clip_index),
    FOREIGN KEY (video_id, clip_index) REFERENCES clips (video_id, clip_index) ON DELETE CASCADE
) WITHOUT ROWID;
CREATE INDEX consolidation_changes_by_video ON consolidation_changes (video_id, clip_index);
