"""Command-line adapters: each command calls one public method and formats its result."""
