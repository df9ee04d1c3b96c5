"""The Claude Desktop bundle's entry point: the server the ``wontopos-mcp`` command runs.

The host runs it with ``uv run --directory <bundle> python <bundle>/server/main.py``
(the manifest's ``mcp_config``), so ``wontopos_mcp`` is the bundle's own copy, installed
by uv from the bundle's ``pyproject.toml``. A file rather than ``-m wontopos_mcp`` because
MCPB's ``entry_point`` names a file, and a host that runs the entry point itself runs it
as a script (where the package's ``__main__.py``, with its relative import, would fail).
"""

from wontopos_mcp.launch import main

raise SystemExit(main())
