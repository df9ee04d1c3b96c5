"""The command line, ``wontopos-mcp``: argument parsing and start-up of the server
(``main``), the human commands that look into a store and fix it (``cli.commands``), ``info``
(``info``), ``import`` of JSON Lines (``importing``), the shared engine's relay and
bookkeeping (``relay``, ``engines``), and the exit codes (``exits``).

May import: ``version``, ``config``, ``logs``, ``errors``, ``rules``, ``contract``, ``verbs``
and ``engine`` (``MemoryService`` and ``bootstrap``), never storage or the model: what the
server needs from them goes through the service. Never another face: the servers it
starts (MCP on stdio and the shared engine's socket, HTTP) are handed to ``main`` by the
entry point above the faces (``wontopos_mcp.launch``), so the command line stands beside
``mcp`` and ``http``, not above them.
"""
