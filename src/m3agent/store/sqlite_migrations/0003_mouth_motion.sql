-- m3agent memory schema, version 3: the active-speaker cue of each face sighting.
-- faces.mouth_motion is how much the face's mouth moved, beyond the rest of the
-- face, since the track's previous sampled frame (m3agent.perception.asd);
-- NULL where it was not measured (first frame of a track, older memories).
-- Face-voice linking correlates it with each voice's speech over time.

ALTER TABLE faces ADD COLUMN mouth_motion REAL;
