"""The exit codes of ``wontopos-mcp``, the server's and the human commands' alike (0: done)."""

EXIT_REFUSED = 1  # a command the engine refused (the refusal is the one line on stderr)
EXIT_BAD_SETTING = 2  # a setting, or the database, cannot work: nothing was served or changed
