"""Semantic consolidation: which sentences may carry a fact, what the model is shown and may reply,
which facts are kept, how a new fact relates to an old one, and running it from settings."""
