"""The engine: every rule that needs stored state, behind ``MemoryService``.

Owns, one part each: the registry rows of stores, speakers and idempotency records
(``registry``), the chunk rows of memories (``memories``), the store as it stood at a
moment (``history``), ranking (``ranking``), how every write commits (``commits``), the
operations (``stores``, ``writes``, ``batch_writes``, ``retagging`` for rename and merge,
``reads``, ``speaker_pages`` for ``by_speaker``), re-embedding a database for another model
(``reindexing``), building a service from settings (``bootstrap``) and the facade the
faces call (``service``).

May import: ``errors``, ``rules``, ``contract``, ``model`` and ``storage``. Never a face,
``config`` (the entry points read settings and pass them in) or a protocol framework.
"""
