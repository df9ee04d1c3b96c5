"""The speakers a question names, and the question without them.

A speaker filter already says who: the filtered person's own name is dropped from the
query before it is embedded and searched, so "what did Bob say about X" ranks on "X".
Without a filter, the registered names a question mentions lean the ranking towards those
people (``names_in``), and are dropped from the text the same way. ``me`` is never a name
here: it is a word in most questions.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

from .names import ME


def query_without_name(query: str, name: str | None) -> str:
    """Drop the filtered speaker's own name from the query: the filter already says who."""
    if name is None or name == ME:
        return query
    stripped = re.sub(rf"(?<!\w){re.escape(name)}(?:'s|’s)?(?!\w)", " ", query, flags=re.IGNORECASE)
    return stripped if stripped.strip(" ?!.,") else query


def _name_pattern(name: str) -> str:
    return rf"(?<!\w){re.escape(name)}(?:'s|’s)?(?!\w)"


def names_in(query: str, names: Sequence[str]) -> list[str]:
    """The registered speakers ``query`` names (as written, a possessive allowed; never
    ``me``): a question about "what Bob said" without a filter leans towards Bob."""
    return [n for n in names if n != ME and re.search(_name_pattern(n), query)]


def query_without_names(query: str, names: Sequence[str]) -> str:
    """The query with these names dropped (the query itself when nothing would be left)."""
    stripped = query
    for name in names:
        stripped = re.sub(_name_pattern(name), " ", stripped)
    return stripped if stripped.strip(" ?!.,") else query
