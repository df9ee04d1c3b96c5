"""The command line, ``wontopos-mcp``: argument parsing and start-up of the server
(``main``), the human commands that look into a store and fix it (``cli.commands``), ``info``
(``info``), ``import`` of JSON Lines (``importing``), and the exit codes (``exits``).

May import: the server faces it launches (``mcp``, ``http``), ``version``, ``config``,
``logs``, ``errors``, ``rules``, ``contract``, ``verbs`` and ``engine`` (``MemoryService``
and ``bootstrap``), never storage or the model: what the server needs from them goes
through the service.
"""
