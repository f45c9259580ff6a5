"""PostgreSQL migrations of the memory index (component ``memory``), applied by ``memory.pg_index``."""
