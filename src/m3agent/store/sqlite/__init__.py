"""The embedded default store: one SQLite file (schema and migrations, rows, search, writers, locks,
error translation)."""
