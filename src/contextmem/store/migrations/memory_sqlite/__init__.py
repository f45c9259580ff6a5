"""SQLite migrations of the memory index (component ``memory``), applied by ``memory.sqlite_index``.

Before these modules existed the index numbered its schema in ``PRAGMA user_version`` (1, 2). Those two
scripts are ``m0001`` and ``m0002`` here, verbatim, so an index file of the old scheme is adopted in place:
its ``user_version`` is recorded as the applied ``memory`` version and only later migrations run (its
vectors are kept; the chunks are derived data and re-derived from the files when a migration says so).
"""
