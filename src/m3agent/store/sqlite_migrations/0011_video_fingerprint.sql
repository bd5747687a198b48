-- m3agent memory schema, version 11: a content fingerprint per video (m3agent.media.fingerprint), so that a
-- video id names one file: a different file under a stored id is refused, never mixed into its clips.
-- '' for a stream, or a video stored before this version (stamped by its next ingest).
ALTER TABLE videos ADD COLUMN fingerprint TEXT NOT NULL DEFAULT '';
