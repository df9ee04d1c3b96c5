"""Imports: one reader a conversation format, from the bytes of an export to typed messages.

Owns: the typed messages and skips every reader yields and the error a reader raises
(``messages``), where an export's bytes come from, a file, a folder or a bounded
``.zip`` read without extracting (``sources``), JSON read as a bounded stream
(``jsonstream``: a nesting cap, a byte bound per message, one-line parse errors), the
readers themselves, one module a format (``whatsapp``, ``telegram``, ``slack``,
``discord``, ``chatgpt``, ``claude``, ``claude_code``, ``subtitles`` for ``vtt`` and
``srt``, ``transcript``), what the assistant-history readers share (``histories``), and
which reader a file is for (``formats``: each reader's cheap ``sniff`` of the first bytes).

A reader knows nothing of stores, speakers or memories: it says who wrote what, when, in
which conversation, with the export's own id, and what it skipped and why. The engine
resolves the names to speakers and stores the messages (``engine.conversation_import``).

May import: ``errors`` and ``rules`` only. No storage, no model.
"""
