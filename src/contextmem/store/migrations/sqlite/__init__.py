"""SQLite migrations of the session store (component ``sessions``)."""
