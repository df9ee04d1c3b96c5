"""Write coordination: who may commit to a database, or to one store of it, now.

Owns: the coordinators (a file lock for a local directory, leases for object storage,
in-process only for LanceDB Cloud) in ``coordination``; leases on an object store's
conditional writes in ``lease``; the lease backends for S3, Azure and GCS in
``object_leases`` (their SDKs imported only when such a database is used).

May import: ``errors`` and ``rules`` (``locations``). Knows nothing of tables.
"""
