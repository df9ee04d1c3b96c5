"""The package's version, in a module of its own so that every face (MCP, HTTP, the CLI)
and the shared stdio engine can name it without importing the package's ``__init__``,
which re-exports the ``Memory`` library face: the faces stand side by side, none above
another."""

__version__ = "0.1.0"
