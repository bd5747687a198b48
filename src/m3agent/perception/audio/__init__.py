"""Audio perception of a clip: voice activity, diarization, speaker embeddings, speech recognition,
sound events, and their standard scores."""
