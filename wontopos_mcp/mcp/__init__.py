"""The MCP face: the tools (``tools``, one adapter per operation), their parameters'
schemas (``params``) and answer models (``answers``), the server that maps every refusal
to the error body (``server``), and the transports that answer every message
(``transport``, with ``jsonrpc`` decoding what arrives).

May import: ``version`` (never the package's ``__init__``, which holds the library face:
the faces stand side by side), ``errors``, ``rules``, ``contract``, ``verbs`` and
``engine`` (``MemoryService`` only). Holds no rule: the service checks every value.
"""
