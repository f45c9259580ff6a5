"""What a sync deletes and inserts for a re-read file (:meth:`SyncPlan.write_set`): the rows of the chunks
it still has are kept, everything else is replaced, and the file ends up holding exactly its chunks."""

from __future__ import annotations

from collections import Counter
from datetime import date

from hypothesis import given
from hypothesis import strategies as st

from contextmem.memory.base import SyncReport
from contextmem.memory.sync import StoredRow, SyncPlan, chunk_key
from contextmem.memory.text import Chunk

_chunks = st.lists(
    st.builds(
        Chunk,
        start_line=st.integers(1, 3),
        end_line=st.integers(3, 4),
        text=st.sampled_from(["alpha", "beta", "gamma"]),
        heading_day=st.sampled_from([None, date(2026, 2, 1)]),
        speakers=st.sampled_from([frozenset(), frozenset({"ann"})]),
        says_when=st.booleans(),
    ),
    max_size=8,
)


def _stored(chunks: list[Chunk], first_id: int) -> list[StoredRow]:
    return [(first_id + i, chunk_key(c)) for i, c in enumerate(chunks)]


@given(old=_chunks, new=_chunks, gone=_chunks)
def test_a_file_ends_up_holding_exactly_its_chunks_and_keeps_every_row_it_can(
    old: list[Chunk], new: list[Chunk], gone: list[Chunk]
) -> None:
    plan = SyncPlan(SyncReport(removed=["memory/2026-01-01.md"]), False, {"MEMORY.md": new})
    stored = {"MEMORY.md": _stored(old, 1), "memory/2026-01-01.md": _stored(gone, 100)}
    changes = plan.write_set((path, row) for path, rows in stored.items() for row in rows)
    dead = set(changes.dead_ids)
    kept = [key for cid, key in stored["MEMORY.md"] if cid not in dead]
    assert Counter(kept + [chunk_key(c) for _, c, _ in changes.rows]) == Counter(map(chunk_key, new))
    assert {cid for cid, _ in stored["memory/2026-01-01.md"]} <= dead  # a removed file keeps nothing
    assert len(dead) == len(changes.dead)  # no row deleted twice
    # Every row whose key the file still has is kept, as many times as the file has it.
    expected_inserts = Counter(map(chunk_key, new)) - Counter(map(chunk_key, old))
    assert Counter(chunk_key(c) for _, c, _ in changes.rows) == expected_inserts
    assert all(rel == "MEMORY.md" and day is None for rel, _, day in changes.rows)


def test_a_daily_files_inserts_carry_its_day() -> None:
    plan = SyncPlan(SyncReport(), False, {"memory/2026-02-01.md": [Chunk(1, 2, "alpha")]})
    assert plan.write_set([]).rows == [("memory/2026-02-01.md", Chunk(1, 2, "alpha"), date(2026, 2, 1))]
