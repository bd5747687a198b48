"""The SQL memory store written once for both backends: its base, rows, people, vectors, writers and the
one dialect that renders its statements for SQLite or PostgreSQL."""
