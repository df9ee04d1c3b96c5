"""The HTTP face: one Starlette app (``app``) serving MCP over Streamable HTTP and SSE,
the hosted API's REST routes (``rest``), ``/healthz`` and the memory browser's static
files (``ui/``); uvicorn as every HTTP run uses it (``server``); the 429 counter of wrong
keys (``wrong_keys``).

May import: ``version`` (never the package's ``__init__``, which holds the library face:
the faces stand side by side), ``errors``, ``rules``, ``contract``, ``verbs``, ``config``,
``engine`` (``MemoryService`` only) and ``mcp`` (the server it mounts).
"""
