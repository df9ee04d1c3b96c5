"""Facades that forward to their parts without restating each signature.

``MemoryService`` answers through the part that owns each operation, and ``Store``
reads through ``ChunkReads``; a forwarding method written by hand repeats the part's
parameters, defaults and docstring, which then drift. :func:`delegate` makes the facade
method from the part's own.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any, Concatenate, ParamSpec, TypeVar

P = ParamSpec("P")
R = TypeVar("R")


def delegate(method: Callable[Concatenate[Any, P], R], part: str) -> Callable[Concatenate[Any, P], R]:
    """A method that is ``method`` of the object held in ``self.<part>``: the same
    signature, defaults and docstring (``functools.wraps``; ``inspect.signature`` reads
    them through ``__wrapped__``), written once, in the part."""

    @functools.wraps(method)
    def forward(self: Any, *args: P.args, **kwargs: P.kwargs) -> R:
        return method(getattr(self, part), *args, **kwargs)

    return forward
