-- m3agent memory schema, version 5: entity merges recorded, so they can be undone.
-- Every merge (by hand or automatic, e.g. two voice entities of one speaking
-- face) writes one row: the surviving entity (keep_id), the absorbed one's old
-- id (absorbed_id; that entity row is gone, so no foreign key), who merged
-- (source) and on what grounds (evidence), and a JSON snapshot of what the merge
-- changed (m3agent.store.merge_log). undone_at is set when the merge is undone;
-- an undone pair is never merged automatically again.

CREATE TABLE entity_merges (
    id          INTEGER PRIMARY KEY AUTOINCREMENT,
    keep_id     INTEGER NOT NULL,
    absorbed_id INTEGER NOT NULL,
    kind        TEXT NOT NULL CHECK (kind IN ('face', 'voice')),
    source      TEXT NOT NULL CHECK (source IN ('auto', 'manual')),
    evidence    TEXT NOT NULL DEFAULT '',
    video_id    TEXT,
    clip_index  INTEGER,
    snapshot    TEXT NOT NULL,
    created_at  TEXT NOT NULL,
    undone_at   TEXT
);
CREATE INDEX entity_merges_by_keep ON entity_merges (keep_id);
CREATE INDEX entity_merges_by_absorbed ON entity_merges (absorbed_id);
