-- m3agent memory schema, version 1.
-- Rows here are the source of truth; the FTS table, tombstones and vector
-- snapshots are derived and rebuilt from them. Every adjacency is indexed.

CREATE TABLE meta (
    key   TEXT PRIMARY KEY,
    value TEXT NOT NULL
) WITHOUT ROWID;

-- Media (JPEG crops, WAV snippets) live here so that deletes can be verified.
CREATE TABLE blobs (
    id   INTEGER PRIMARY KEY,
    kind TEXT NOT NULL CHECK (kind IN ('face_crop', 'voice_wav')),
    data BLOB NOT NULL
);

-- ``id`` never changes (not even on VACUUM) and is never reused: vector snapshots refer to it.
CREATE TABLE videos (
    id         INTEGER PRIMARY KEY AUTOINCREMENT,
    video_id   TEXT NOT NULL UNIQUE,
    source     TEXT NOT NULL,
    duration_s REAL,
    title      TEXT NOT NULL DEFAULT '',
    metadata   TEXT NOT NULL DEFAULT '{}',
    added_at   TEXT NOT NULL
);

CREATE TABLE clips (
    video_id   TEXT NOT NULL REFERENCES videos (video_id) ON DELETE CASCADE,
    clip_index INTEGER NOT NULL CHECK (clip_index >= 0),
    start_s    REAL NOT NULL,
    end_s      REAL NOT NULL,
    status     TEXT NOT NULL CHECK (status IN ('pending', 'done', 'failed', 'skipped')),
    reason     TEXT NOT NULL DEFAULT '',
    updated_at TEXT NOT NULL,
    PRIMARY KEY (video_id, clip_index)
) WITHOUT ROWID;

CREATE TABLE clip_timings (
    video_id   TEXT NOT NULL,
    clip_index INTEGER NOT NULL,
    stage      TEXT NOT NULL,
    seconds    REAL NOT NULL,
    PRIMARY KEY (video_id, clip_index, stage),
    FOREIGN KEY (video_id, clip_index) REFERENCES clips (video_id, clip_index) ON DELETE CASCADE
) WITHOUT ROWID;

-- Faces and voices share this one id space (the N of <face_N> / <voice_N>); ids are never reused.
CREATE TABLE entities (
    id         INTEGER PRIMARY KEY AUTOINCREMENT,
    kind       TEXT NOT NULL CHECK (kind IN ('face', 'voice')),
    name       TEXT NOT NULL DEFAULT '',
    video_id   TEXT REFERENCES videos (video_id) ON DELETE SET NULL,
    first_clip INTEGER,
    last_clip  INTEGER,
    created_at TEXT NOT NULL
);
CREATE INDEX entities_by_video ON entities (video_id);

CREATE TABLE entity_embeddings (
    entity_id INTEGER NOT NULL REFERENCES entities (id) ON DELETE CASCADE,
    ord       INTEGER NOT NULL,
    vector    BLOB NOT NULL,
    PRIMARY KEY (entity_id, ord)
);

-- Stable character ids: every entity owns one base id (never reused); a group of
-- equivalent entities is named by the smallest base id among its members.
CREATE TABLE characters (
    id        INTEGER PRIMARY KEY AUTOINCREMENT,
    entity_id INTEGER NOT NULL UNIQUE REFERENCES entities (id) ON DELETE CASCADE
);

CREATE TABLE faces (
    id         INTEGER PRIMARY KEY,
    video_id   TEXT NOT NULL,
    clip_index INTEGER NOT NULL,
    time_s     REAL NOT NULL,
    x1         REAL NOT NULL,
    y1         REAL NOT NULL,
    x2         REAL NOT NULL,
    y2         REAL NOT NULL,
    det_score  REAL NOT NULL,
    quality    REAL NOT NULL DEFAULT 0,
    track      INTEGER NOT NULL DEFAULT -1,
    embedding  BLOB,
    crop_blob  INTEGER,
    entity_id  INTEGER REFERENCES entities (id) ON DELETE CASCADE,
    FOREIGN KEY (video_id, clip_index) REFERENCES clips (video_id, clip_index) ON DELETE CASCADE
);
CREATE INDEX faces_by_clip ON faces (video_id, clip_index);
CREATE INDEX faces_by_entity ON faces (entity_id);
CREATE TRIGGER faces_drop_crop AFTER DELETE ON faces WHEN OLD.crop_blob IS NOT NULL
BEGIN
    DELETE FROM blobs WHERE id = OLD.crop_blob;
END;

CREATE TABLE voices (
    id         INTEGER PRIMARY KEY,
    video_id   TEXT NOT NULL,
    clip_index INTEGER NOT NULL,
    start_s    REAL NOT NULL,
    end_s      REAL NOT NULL,
    text       TEXT NOT NULL DEFAULT '',
    speaker    INTEGER NOT NULL DEFAULT -1,
    language   TEXT NOT NULL DEFAULT '',
    words      TEXT NOT NULL DEFAULT '[]',
    embedding  BLOB,
    audio_blob INTEGER,
    entity_id  INTEGER REFERENCES entities (id) ON DELETE CASCADE,
    FOREIGN KEY (video_id, clip_index) REFERENCES clips (video_id, clip_index) ON DELETE CASCADE
);
CREATE INDEX voices_by_clip ON voices (video_id, clip_index);
CREATE INDEX voices_by_entity ON voices (entity_id);
CREATE TRIGGER voices_drop_audio AFTER DELETE ON voices WHEN OLD.audio_blob IS NOT NULL
BEGIN
    DELETE FROM blobs WHERE id = OLD.audio_blob;
END;

-- Memory ids are never reused (AUTOINCREMENT): the vector index keys on them.
CREATE TABLE memories (
    id              INTEGER PRIMARY KEY AUTOINCREMENT,
    kind            TEXT NOT NULL CHECK (kind IN ('episodic', 'semantic')),
    text            TEXT NOT NULL,
    video_id        TEXT NOT NULL,
    clip_index      INTEGER NOT NULL,
    start_s         REAL NOT NULL,
    end_s           REAL NOT NULL,
    weight          REAL NOT NULL DEFAULT 1,
    confidence      REAL NOT NULL DEFAULT 1,
    provenance      TEXT NOT NULL DEFAULT '',
    last_clip_index INTEGER,
    embedding       BLOB NOT NULL,
    created_at      TEXT NOT NULL,
    FOREIGN KEY (video_id, clip_index) REFERENCES clips (video_id, clip_index) ON DELETE CASCADE
);
CREATE INDEX memories_by_clip ON memories (video_id, clip_index);

CREATE TABLE edges (
    entity_id INTEGER NOT NULL REFERENCES entities (id) ON DELETE CASCADE,
    memory_id INTEGER NOT NULL REFERENCES memories (id) ON DELETE CASCADE,
    weight    REAL NOT NULL DEFAULT 1,
    PRIMARY KEY (entity_id, memory_id)
) WITHOUT ROWID;
CREATE INDEX edges_by_memory ON edges (memory_id, entity_id);

-- Evidence log: the latest row of a pair wins; confidence 0 revokes.
CREATE TABLE equivalences (
    seq        INTEGER PRIMARY KEY AUTOINCREMENT,
    a          INTEGER NOT NULL REFERENCES entities (id) ON DELETE CASCADE,
    b          INTEGER NOT NULL REFERENCES entities (id) ON DELETE CASCADE,
    confidence REAL NOT NULL CHECK (confidence >= 0 AND confidence <= 1),
    source     TEXT NOT NULL DEFAULT '',
    video_id   TEXT,
    clip_index INTEGER,
    CHECK (a < b),
    FOREIGN KEY (video_id, clip_index) REFERENCES clips (video_id, clip_index) ON DELETE CASCADE
);
CREATE INDEX equivalences_by_a ON equivalences (a, b);
CREATE INDEX equivalences_by_b ON equivalences (b);
CREATE INDEX equivalences_by_clip ON equivalences (video_id, clip_index);

-- Keyword index (BM25); '_' is a token character so <face_3> is the one token face_3.
CREATE VIRTUAL TABLE memories_fts USING fts5 (
    text,
    content = 'memories',
    content_rowid = 'id',
    tokenize = "unicode61 remove_diacritics 2 tokenchars '_'"
);
CREATE TRIGGER memories_fts_insert AFTER INSERT ON memories
BEGIN
    INSERT INTO memories_fts (rowid, text) VALUES (NEW.id, NEW.text);
END;
CREATE TRIGGER memories_fts_delete AFTER DELETE ON memories
BEGIN
    INSERT INTO memories_fts (memories_fts, rowid, text) VALUES ('delete', OLD.id, OLD.text);
END;
CREATE TRIGGER memories_fts_update AFTER UPDATE OF text ON memories
BEGIN
    INSERT INTO memories_fts (memories_fts, rowid, text) VALUES ('delete', OLD.id, OLD.text);
    INSERT INTO memories_fts (rowid, text) VALUES (NEW.id, NEW.text);
END;

-- Deleted memory ids, so in-memory and persisted vector indexes drop them.
CREATE TABLE memory_tombstones (
    seq       INTEGER PRIMARY KEY AUTOINCREMENT,
    memory_id INTEGER NOT NULL
);
CREATE TRIGGER memories_tombstone AFTER DELETE ON memories
BEGIN
    INSERT INTO memory_tombstones (memory_id) VALUES (OLD.id);
END;

-- Derived vector index (filter columns + int8 vectors + HNSW graph) covering
-- memories with id <= watermark and tombstones with seq <= tomb_seq.
CREATE TABLE vector_snapshots (
    name      TEXT PRIMARY KEY,
    dim       INTEGER NOT NULL,
    watermark INTEGER NOT NULL,
    tomb_seq  INTEGER NOT NULL,
    n_rows    INTEGER NOT NULL,
    params    TEXT NOT NULL DEFAULT '{}',
    built_at  TEXT NOT NULL
);
CREATE TABLE vector_snapshot_chunks (
    id   INTEGER PRIMARY KEY,
    name TEXT NOT NULL REFERENCES vector_snapshots (name) ON DELETE CASCADE,
    part TEXT NOT NULL,
    seq  INTEGER NOT NULL,
    data BLOB NOT NULL,
    UNIQUE (name, part, seq)
);
