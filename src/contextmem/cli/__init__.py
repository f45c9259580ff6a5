"""Command-line adapters: each command calls one public method and formats its result."""

__all__: list[str] = []
