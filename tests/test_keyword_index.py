"""The in-process keyword index (m3agent.store.index.keyword) ranks as FTS5 does: the same top-k ids and scores
on real text (LoCoMo turns, real questions), unfiltered and under video, kind, time and character filters; after
inserts, deletes and text changes; inside a transaction that wrote rows it has not synced (merged from FTS5) or
changed text (FTS5 answers); after compaction. Its tokens and document lengths are FTS5's."""

from __future__ import annotations

import json
import shutil
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from m3agent.bench.locomo.data import load_locomo
from m3agent.bench.locomo.ingest import ingest_sample
from m3agent.control.retrieval.ranking import keyword_text
from m3agent.domain import Clip, Memory, MemoryKind, SearchFilter, Video
from m3agent.embed.hashing import HashingEmbedder
from m3agent.store import open_store
from m3agent.store.index import keyword as keyword_index
from m3agent.store.index.keyword import KeywordIndex
from m3agent.store.index.postings import Tokenizer, fts_totals
from m3agent.store.sqlite import search as sqlite_search
from m3agent.store.sqlite.rows import filter_sql, fts_query
from m3agent.store.sqlite.store import SQLiteStore

ODD_TEXTS = [
    "Café naïve Zoë’s façade: the ÉCOLE near the Straße",
    "<face_3> shows a photo of the old ĳssel bridge — 日本語のテキスト and emoji 📷 too",
    "Ⅻ ² ½ ① résumé RÉSUMÉ Ångström ǅ ß ﬁne İstanbul ΣΊΣΥΦΟΣ ǈ",
    "e-mail me at ann_b@example.com, the file is old_photo_2.jpg",
]
EXTRA_QUERIES = ["old photo", "photo", "face_3", "<face_30>", "e-mail", "naïve naive cafe", "resume",
                 "straße strasse", "日本語のテキスト", "𞤀𞤁 photo", "ﬁne fine", "Zoë’s", "says", ""]


@pytest.fixture(scope="module")
def locomo(tmp_path_factory: pytest.TempPathFactory, data_dir: Path) -> tuple[Path, list[str]]:
    """Two LoCoMo conversations as memories (about 1,100 turns), odd texts of both kinds, and queries: the
    questions' keyword text (as the searcher sends it) and the raw questions."""
    samples = load_locomo(data_dir / "locomo" / "locomo10.json")[:2]
    path = tmp_path_factory.mktemp("keywords") / "memory.db"
    embedder = HashingEmbedder(64)
    with open_store(str(path)) as store:
        store.set_embedding_model(embedder.name, embedder.dim)
        for sample in samples:
            ingest_sample(store, embedder, sample)
        store.add_video(Video("odd", "/odd.mp4"))
        _add(store, Clip("odd", 0, 0.0, 30.0), ODD_TEXTS * 3, embedder)
    raw = json.loads((data_dir / "locomo" / "locomo10.json").read_text())[:2]
    questions = [q["question"] for s in raw for q in s["qa"] if q.get("question")][::9]
    return path, [keyword_text(q) for q in questions] + questions[:20] + EXTRA_QUERIES


def _add(store: Any, clip: Clip, texts: list[str], embedder: HashingEmbedder) -> list[int]:
    with store.clip(clip) as writer:
        return [writer.add_memory(Memory(
            kind=MemoryKind.SEMANTIC if i % 3 == 0 else MemoryKind.EPISODIC, text=text, video_id=clip.video_id,
            clip_index=clip.index, start_s=clip.start_s, end_s=clip.end_s, embedding=vector,
        )) for i, (text, vector) in enumerate(zip(texts, embedder.embed(texts), strict=True))]


@pytest.fixture
def store(locomo: tuple[Path, list[str]], tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[SQLiteStore]:
    """A copy of the memory with its keyword index built (the threshold lowered to this small memory)."""
    monkeypatch.setattr(keyword_index, "KEYWORD_MIN_ROWS", 100)
    copy = tmp_path / "memory.db"
    shutil.copyfile(locomo[0], copy)
    opened = open_store(str(copy))
    assert isinstance(opened, SQLiteStore)
    opened.start_keyword_index()  # starts the background build
    index = opened._synced_keywords()
    index.wait()
    assert index.ready and not index.disabled
    yield opened
    opened.close()


@pytest.fixture
def answered(monkeypatch: pytest.MonkeyPatch) -> Counter[str]:
    """How searches were answered: ``index`` (the index ranked) or ``fts`` (FTS5 ranked)."""
    seen: Counter[str] = Counter()
    original = sqlite_search._indexed_ranking

    def spy(*args: Any) -> Any:
        found = original(*args)
        seen["fts" if found is None else "index"] += 1
        return found

    monkeypatch.setattr(sqlite_search, "_indexed_ranking", spy)
    return seen


def filters(store: SQLiteStore) -> list[SearchFilter | None]:
    db = store._db
    video = db.execute("SELECT video_id FROM videos ORDER BY id LIMIT 1").fetchone()[0]
    people = [r[0] for r in db.execute("SELECT entity_id, count(*) c FROM edges GROUP BY entity_id ORDER BY c DESC")]
    return [
        None,
        SearchFilter(),
        SearchFilter(video_ids=(video,), before_clip=6),
        SearchFilter(video_ids=(video, "odd", "missing")),
        SearchFilter(kinds=(MemoryKind.SEMANTIC,)),
        SearchFilter(entity_ids=(people[0],)),
        SearchFilter(entity_ids=tuple(people[1:3]), before_clip=10),
        SearchFilter(start_s=60.0, end_s=300.0, exclude_clips=frozenset({(video, 3), ("odd", 0)})),
    ]


def fts5_top(store: SQLiteStore, text: str, k: int, flt: SearchFilter | None) -> list[tuple[int, float]]:
    """The reference: FTS5's own ranking, joined with the memories under the filter."""
    match = fts_query(text)
    if not match:
        return []
    where, params = filter_sql(flt)
    rows = store._db.execute(
        f"SELECT f.rowid, f.rank FROM memories_fts f JOIN memories m ON m.id = f.rowid"
        f" WHERE memories_fts MATCH ? AND {where} ORDER BY f.rank LIMIT ?", [match, *params, k]).fetchall()
    return [(int(i), -float(rank)) for i, rank in rows]


def assert_same(store: SQLiteStore, queries: list[str], ks: tuple[int, ...] = (10, 60)) -> int:
    """Every query under every filter: the store's answer is FTS5's (ids in order, scores to 1e-12)."""
    compared = 0
    for flt in filters(store):
        for text in queries:
            for k in ks:
                expected = fts5_top(store, text, k, flt)
                found = [(s.memory.id, s.score) for s in store.keyword_search(text, k, flt)]
                assert [i for i, _ in found] == [i for i, _ in expected], (text, flt, k)
                assert np.allclose([s for _, s in found], [s for _, s in expected], rtol=1e-12, atol=0), (text, flt)
                compared += len(expected)
    return compared


def test_the_index_ranks_as_fts5(store: SQLiteStore, locomo: tuple[Path, list[str]], answered: Counter[str]) -> None:
    assert assert_same(store, locomo[1]) > 10_000
    assert answered["index"] > 10 * answered["fts"]  # FTS5 only for the words it reads as several tokens or none


def test_inserts_deletes_and_text_changes(store: SQLiteStore, locomo: tuple[Path, list[str]],
                                          answered: Counter[str]) -> None:
    queries = locomo[1][::4] + EXTRA_QUERIES
    embedder = HashingEmbedder(64)
    index = store._synced_keywords()
    db = store._db
    texts = [r[0] for r in db.execute("SELECT text FROM memories ORDER BY id DESC LIMIT 40")]
    store.add_video(Video("new", "/new.mp4"))

    # rows written inside the open transaction: the index ranks what it has, FTS5 the rows above its watermark
    with store.clip(Clip("new", 0, 0.0, 30.0)) as writer:
        ids = [writer.add_memory(Memory(kind=MemoryKind.EPISODIC, text=t, video_id="new", clip_index=0, start_s=0.0,
                                        end_s=30.0, embedding=v)) for t, v in zip(texts, embedder.embed(texts),
                                                                                 strict=True)]
        before = answered["index"]
        assert_same(store, queries, ks=(10,))
        assert answered["index"] > before and index.watermark < ids[0]
    assert_same(store, queries)  # committed: synced
    assert index.watermark == ids[-1]

    # text changes: the old text is forgotten, the new one found; inside the transaction FTS5 answers
    rewritten = [r[0] for r in db.execute("SELECT id FROM memories WHERE text LIKE '%photo%' LIMIT 30")]
    with store._tx():
        db.executemany("UPDATE memories SET text = ? WHERE id = ?",
                       [(f"a rewritten memory about a blue kayak {i}", i) for i in rewritten])
        before = dict(answered)
        assert_same(store, ["photo kayak", "old photo", "blue kayak"], ks=(10,))
        assert answered["index"] == before.get("index", 0)
    assert_same(store, [*queries, "photo kayak", "blue kayak"])
    assert index.text_seq > 0 and answered["index"] > 0

    # deletions: a memory, then a whole video
    store.delete_memory(rewritten[0])
    store.delete_video(locomo_video(store))
    assert_same(store, [*queries, "blue kayak"])

    # compaction forgets the tombstones and text changes the index covers; it still ranks as FTS5
    store.compact()
    assert db.execute("SELECT count(*) FROM memory_text_changes").fetchone()[0] == 0
    assert_same(store, queries)
    assert (index.n_alive, index.total_tokens) == fts_totals(db)


def locomo_video(store: SQLiteStore) -> str:
    return str(store._db.execute("SELECT video_id FROM videos ORDER BY id LIMIT 1").fetchone()[0])


def test_an_entity_merge_rewrites_tags_the_index_follows(store: SQLiteStore, answered: Counter[str]) -> None:
    """Merging entities rewrites ``<voice_a>`` into ``<voice_b>`` in memory text (a logged text change)."""
    db = store._db
    tagged = db.execute("SELECT e.entity_id, count(*) FROM edges e JOIN memories m ON m.id = e.memory_id"
                        " WHERE m.text LIKE '%<voice_%' GROUP BY e.entity_id ORDER BY e.entity_id").fetchall()
    if len(tagged) < 2:
        pytest.skip("the ingested memories carry no voice tags")
    keep, absorb = tagged[0][0], tagged[1][0]
    words = [f"voice_{keep}", f"voice_{absorb}", f"voice_{keep} voice_{absorb} photo"]
    assert_same(store, words)
    store.merge_entities(keep, absorb)
    assert_same(store, words)
    assert not store.keyword_search(f"voice_{absorb}", 5)
    assert answered["index"] > 0


def test_a_new_process_index_and_a_replaced_file(store: SQLiteStore, locomo: tuple[Path, list[str]]) -> None:
    """A second index of the file (another process's) catches up by the same logs; a file replaced by a smaller
    one (fewer rows than the watermark) is indexed again from scratch."""
    other = KeywordIndex(store.path)
    other.build(store._db)
    assert (other.watermark, other.n_alive, other.total_tokens) == (
        store._synced_keywords().watermark, *fts_totals(store._db))
    index = store._synced_keywords()
    index.watermark += 10**9  # as if the index had seen a bigger file
    index.sync(store._db, background=False)
    assert not index.ready
    index.sync(store._db)
    index.wait()
    assert index.ready
    assert_same(store, locomo[1][:20])


def test_tokens_and_lengths_are_fts5s(store: SQLiteStore) -> None:
    """The Python split of ASCII text and SQLite's tokenizer for the rest give FTS5's terms per memory (its
    ``fts5vocab`` instances) and its document lengths (``memories_fts_docsize``)."""
    db = store._db
    db.execute("CREATE VIRTUAL TABLE temp.instances USING fts5vocab(main, memories_fts, instance)")
    expected: dict[int, Counter[str]] = {}
    for doc, term in db.execute("SELECT doc, term FROM temp.instances"):
        expected.setdefault(doc, Counter())[term] += 1
    rows = db.execute("SELECT id, text FROM memories ORDER BY id").fetchall()
    found = Tokenizer().tokens([t for _, t in rows])
    assert any(not t.isascii() for _, t in rows)
    assert {i: Counter(tokens) for (i, _), tokens in zip(rows, found, strict=True) if tokens} == expected
    lengths = {i: len(tokens) for (i, _), tokens in zip(rows, found, strict=True)}
    index = store._synced_keywords()
    assert dict(zip(index.col("ids").tolist(), index.col("length").tolist(), strict=True)) == lengths
    assert (index.n_alive, index.total_tokens) == fts_totals(db)
