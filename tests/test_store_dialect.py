"""The SQL both stores share: one text with ``?`` placeholders, rendered per driver."""

from __future__ import annotations

import sqlite3

from m3agent.store.sql import dialect
from m3agent.store.sql.dialect import Dialect, render


def test_postgres_gets_percent_placeholders_and_literals_stay_as_written() -> None:
    sql = "UPDATE t SET a = '?', b = 'it''s 5%' WHERE c = ? AND d LIKE 'x%' AND e = ?"
    assert render(sql, Dialect.SQLITE) == sql
    assert render(sql, Dialect.POSTGRES) == (
        "UPDATE t SET a = '?', b = 'it''s 5%%' WHERE c = %s AND d LIKE 'x%%' AND e = %s"
    )


def test_every_shared_statement_has_as_many_placeholders_in_both_dialects() -> None:
    statements = [dialect.MEMORY_SPAN, dialect.QUOTABLE_SEGMENTS, dialect.DELETE_MEMORY, dialect.CLEAR_TRANSCRIPT,
                  dialect.INSERT_LINK, dialect.UPSERT_TIMING]
    for sql in statements:
        pg = render(sql, Dialect.POSTGRES)
        assert "?" not in pg and pg.count("%s") == sql.count("?") > 0


def test_the_shared_statements_are_valid_sqlite() -> None:
    from m3agent.domain import Clip

    db = sqlite3.connect(":memory:")
    db.execute("CREATE TABLE clip_timings (video_id TEXT, clip_index INT, stage TEXT, seconds REAL,"
               " PRIMARY KEY (video_id, clip_index, stage))")
    clip = Clip("v", 3, 0.0, 4.0)
    dialect.record_timing(db, Dialect.SQLITE, clip, "faces", 1.5)
    dialect.record_timing(db, Dialect.SQLITE, clip, "faces", 2.5)  # a rerun replaces the timing
    assert db.execute("SELECT video_id, clip_index, stage, seconds FROM clip_timings").fetchall() == [
        ("v", 3, "faces", 2.5)
    ]
