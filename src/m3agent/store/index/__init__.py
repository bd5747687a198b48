"""The in-process search indexes of a SQLite memory: vectors (int8 mirror, HNSW) and keywords (FTS5
tokens over posting arrays), one per store file."""
