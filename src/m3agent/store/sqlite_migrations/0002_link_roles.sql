-- m3agent memory schema, version 2: face-voice links by role.
-- Version 1 kept links as an unordered pair (a < b), so readers had to guess
-- which side was the face, and a voice created before its face was read with
-- the roles swapped. Links now name face_id and voice_id, checked against
-- entities.kind on every write, and say what they rest on (evidence).
--
-- Upgrade: every version-1 row that joins a face and a voice is copied with
-- its roles taken from entities.kind, keeping its seq (the log order) and
-- clip. Sources outside the known set become 'import' (the reference-graph
-- importer wrote 'm3-bench-graph') or 'manual', the old name kept as evidence.
-- Rows joining two faces or two voices are dropped: they are no face-voice
-- link (merge the entities to make them one).

CREATE TABLE links (
    seq        INTEGER PRIMARY KEY AUTOINCREMENT,
    face_id    INTEGER NOT NULL REFERENCES entities (id) ON DELETE CASCADE,
    voice_id   INTEGER NOT NULL REFERENCES entities (id) ON DELETE CASCADE,
    confidence REAL NOT NULL CHECK (confidence >= 0 AND confidence <= 1),
    source     TEXT NOT NULL CHECK (source IN ('av', 'llm', 'import', 'manual')),
    evidence   TEXT NOT NULL DEFAULT '',
    video_id   TEXT,
    clip_index INTEGER,
    FOREIGN KEY (video_id, clip_index) REFERENCES clips (video_id, clip_index) ON DELETE CASCADE
);
CREATE INDEX links_by_pair ON links (face_id, voice_id);
CREATE INDEX links_by_voice ON links (voice_id);
CREATE INDEX links_by_clip ON links (video_id, clip_index);

CREATE TRIGGER links_roles_insert BEFORE INSERT ON links
WHEN (SELECT kind FROM entities WHERE id = NEW.face_id) IS NOT 'face'
  OR (SELECT kind FROM entities WHERE id = NEW.voice_id) IS NOT 'voice'
BEGIN
    SELECT RAISE(ABORT, 'a link joins a face entity (face_id) and a voice entity (voice_id)');
END;
CREATE TRIGGER links_roles_update BEFORE UPDATE OF face_id, voice_id ON links
WHEN (SELECT kind FROM entities WHERE id = NEW.face_id) IS NOT 'face'
  OR (SELECT kind FROM entities WHERE id = NEW.voice_id) IS NOT 'voice'
BEGIN
    SELECT RAISE(ABORT, 'a link joins a face entity (face_id) and a voice entity (voice_id)');
END;

INSERT INTO links (seq, face_id, voice_id, confidence, source, evidence, video_id, clip_index)
SELECT q.seq,
       CASE WHEN ea.kind = 'face' THEN q.a ELSE q.b END,
       CASE WHEN ea.kind = 'face' THEN q.b ELSE q.a END,
       q.confidence,
       CASE WHEN q.source IN ('av', 'llm', 'import', 'manual') THEN q.source
            WHEN q.source = 'm3-bench-graph' THEN 'import'
            ELSE 'manual' END,
       CASE WHEN q.source IN ('av', 'llm', 'import', 'manual') THEN ''
            ELSE 'recorded as ' || quote(q.source) || ' before link roles' END,
       q.video_id,
       q.clip_index
FROM equivalences q
JOIN entities ea ON ea.id = q.a
JOIN entities eb ON eb.id = q.b
WHERE ea.kind <> eb.kind
ORDER BY q.seq;

DROP TABLE equivalences;
