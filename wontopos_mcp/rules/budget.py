"""A context budget (``max_chars`` on search and recall): an answer that fits what
the caller can put in a prompt.

Best first, up to the first item that would not fit, and never nothing: a budget smaller
than the best memory still gets that memory (an empty answer would hide that there was
one). Items are measured by their text, the part a prompt pays for.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TypeVar

T = TypeVar("T")


def fit(items: Sequence[T], size: Callable[[T], int], budget: int, *, at_least_one: bool = True) -> tuple[list[T], int]:
    """(the items that fit, what is left of the budget), in order."""
    kept: list[T] = []
    for item in items:
        cost = size(item)
        if cost > budget and not (at_least_one and not kept):
            break
        kept.append(item)
        budget = max(0, budget - cost)
    return kept, budget
