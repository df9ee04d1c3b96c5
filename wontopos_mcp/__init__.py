"""wontopos-mcp: memory that knows who said it.

A local-first, offline long-term memory for AI agents in which every memory can carry
its speaker. ``Memory`` is the Python face; ``wontopos-mcp`` the MCP server. Importing
the package is cheap: heavy modules (LanceDB, the model) load on first use.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from .errors import (
    APIConnectionError,
    APIError,
    AuthenticationError,
    BadRequestError,
    ConflictError,
    GoneError,
    InvalidRequestError,
    NotFoundError,
    PaymentRequiredError,
    PermissionDeniedError,
    RateLimitError,
    ServerError,
    UnavailableError,
    WontoposError,
    WosError,
)
from .version import __version__

__all__ = [
    "APIConnectionError",
    "APIError",
    "AuthenticationError",
    "BadRequestError",
    "ConflictError",
    "GoneError",
    "InvalidRequestError",
    "Memory",
    "NotFoundError",
    "PaymentRequiredError",
    "PermissionDeniedError",
    "RateLimitError",
    "ServerError",
    "UnavailableError",
    "WontoposError",
    "WosError",
    "__version__",
]

if TYPE_CHECKING:
    from .library import Memory


def __getattr__(name: str) -> Any:
    if name == "Memory":
        from .library import Memory

        return Memory
    raise AttributeError(f"module 'wontopos_mcp' has no attribute {name!r}")
