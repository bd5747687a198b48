"""The shared store: PostgreSQL + pgvector (schema and migrations, rows, writers)."""
