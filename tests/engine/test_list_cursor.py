"""The ``memory_list`` cursor is (seq, memory id): two memories sharing a sequence number
(two replicas may give one number twice, issue 11) are both listed whatever the page
size, and a bare-seq cursor of an earlier version is still read."""

from __future__ import annotations

import pytest
from support import memory_rows, next_seq, refused, write_rows

from wontopos_mcp.engine.service import MemoryService


def write_row_at(service: MemoryService, text: str, seq: int) -> str:
    """Store ``text`` in the default store with sequence number ``seq`` (as a replica
    that decided the same number would). Returns its id."""
    memory_id, rows = memory_rows(service, text, seq=seq)
    write_rows(service, rows)
    return memory_id


@pytest.fixture
def tied(service: MemoryService) -> list[str]:
    """Ids in listing order: one memory, three sharing the next seq, one after them."""
    first = service.memory_add("The boiler was serviced in March.")["id"]
    seq = next_seq(service)
    texts = ["Lena prefers tea to coffee.", "The bike lock code is 4821.", "Our dentist moved to Elm Street."]
    same = sorted(write_row_at(service, text, seq) for text in texts)
    last = service.memory_add("The lease ends in September.")["id"]
    return [first, *same, last]


@pytest.mark.slow
@pytest.mark.parametrize("page", [1, 2, 3, 5])
def test_memories_sharing_a_seq_are_each_listed_once_at_every_page_size(
    service: MemoryService, tied: list[str], page: int
) -> None:
    seen: list[str] = []
    cursor = None
    for _ in range(len(tied) + 1):
        answer = service.memory_list(limit=page, cursor=cursor)
        seen += [memory["id"] for memory in answer["memories"]]
        cursor = answer["next_cursor"]
        if cursor is None:
            break
    assert seen == tied


@pytest.mark.slow
def test_a_bare_seq_cursor_of_an_earlier_version_still_pages(service: MemoryService, tied: list[str]) -> None:
    """Read as "after every memory with that seq", as it was."""
    first = service.memory_list(limit=1)
    seq = first["next_cursor"].split(":")[0]
    assert [m["id"] for m in service.memory_list(cursor=seq)["memories"]] == tied[1:]
    assert [m["id"] for m in service.memory_list(cursor=str(int(seq) + 1))["memories"]] == tied[4:]


@pytest.mark.parametrize("cursor", ["1:", "1:abc", "1:' OR 1=1 --", ":0b1f", "1:" + "g" * 36, "1:" + "a" * 37])
def test_a_malformed_pair_cursor_is_400_naming_the_cursor(service: MemoryService, cursor: str) -> None:
    with refused(400, field="cursor"):
        service.memory_list(cursor=cursor)
