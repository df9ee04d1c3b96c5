"""Storage: the only wing that imports ``lancedb`` and ``pyarrow``.

Owns: the adapter the engine talks to (``adapter.Store``: the database, its locks, its
model record and its purges) and its two tables, each one object holding its reads and
writes (``registry_table``, ``chunks_table``), over the connection and the commit path they
share (``database``); which model built a database (``model_record``); LanceDB's import
(``lancedb_import``: quiet, its unused REST client deferred), the two tables' layout and
indexes (``schema``), the chunk searches on LanceDB's async loop (``chunk_search``), every
where-clause and the one quoting function (``where``), upkeep after commits and its
decisions from the table's state (``upkeep``, ``upkeep_policy``), erasure that reaches the
disk (``purge``; its steps on one table, ``purge_steps``, run in a child of lower
priority for a large table, ``purge_worker``), the start-up checks of a database (``startup_checks``), and who may
write now (``locks/``: the file lock, leases on object storage).

May import: ``errors``, ``rules`` and ``model`` (the model record: which model built a
database). Knows tables and rows, never the answers the faces send.
"""
