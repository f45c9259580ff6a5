import sys

from .cli import main_mcp

sys.exit(main_mcp())
