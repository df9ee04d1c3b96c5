"""The HTTP face: one Starlette app (``app``) serving MCP over Streamable HTTP and SSE,
the hosted API's REST routes (``rest``), ``/healthz`` and the memory browser's static
files (``ui/``); uvicorn as every HTTP run uses it (``server``); the wrong-key budget
behind the 429 (``wrong_keys``); request bodies: limit, deadline, budget (``bodies``).

May import: ``version`` (never the package's ``__init__``, which holds the library face:
the faces stand side by side), ``errors``, ``rules``, ``contract``, ``verbs``, ``config``,
``engine`` (``MemoryService`` only) and ``mcp`` (the server it mounts).
"""
