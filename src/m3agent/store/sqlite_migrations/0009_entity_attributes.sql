-- m3agent memory schema, version 9: measured descriptions of people, and the shots of each clip.
-- entity_attributes: one row per entity, clip and attribute name when written (voice register,
-- position, depth, apparent gender and age; perception/attributes). `weight` is the evidence behind
-- the value (voiced seconds, sightings, face crops), so rows combine over clips. A merge moves the
-- absorbed entity's rows to the kept one (then one clip may hold a row of each; an undo moves them
-- back); a split moves each clip's rows with the majority of that clip's observations.
-- shots: the shot boundaries of a clip and whether each shows a still picture or live video.
-- Both go with their clip (and so their video); attributes also with their entity.

CREATE TABLE entity_attributes (
    id         INTEGER PRIMARY KEY,
    entity_id  INTEGER NOT NULL REFERENCES entities (id) ON DELETE CASCADE,
    video_id   TEXT NOT NULL,
    clip_index INTEGER NOT NULL,
    name       TEXT NOT NULL,
    value      TEXT NOT NULL,
    confidence REAL NOT NULL CHECK (confidence >= 0 AND confidence <= 1),
    weight     REAL NOT NULL CHECK (weight >= 0),
    evidence   TEXT NOT NULL DEFAULT '',
    FOREIGN KEY (video_id, clip_index) REFERENCES clips (video_id, clip_index) ON DELETE CASCADE
);
CREATE INDEX entity_attributes_by_entity ON entity_attributes (entity_id, name);
CREATE INDEX entity_attributes_by_clip ON entity_attributes (video_id, clip_index);

CREATE TABLE shots (
    video_id   TEXT NOT NULL,
    clip_index INTEGER NOT NULL,
    start_s    REAL NOT NULL,
    end_s      REAL NOT NULL,
    cut        INTEGER NOT NULL DEFAULT 0 CHECK (cut IN (0, 1)),
    kind       TEXT NOT NULL CHECK (kind IN ('still', 'live', 'uncertain')),
    confidence REAL NOT NULL CHECK (confidence >= 0 AND confidence <= 1),
    motion     REAL,
    evidence   TEXT NOT NULL DEFAULT '',
    PRIMARY KEY (video_id, clip_index, start_s),
    FOREIGN KEY (video_id, clip_index) REFERENCES clips (video_id, clip_index) ON DELETE CASCADE
) WITHOUT ROWID;
