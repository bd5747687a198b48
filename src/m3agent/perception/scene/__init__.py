"""The scene stages of a clip: shots, on-screen text, objects and their detectors, and the model files
they read from installed wheels."""
