"""Talk to ``contextmem mcp`` over stdio with the official MCP client (offline: hash embedder, no model).

python examples/mcp_stdio_client.py
"""

from __future__ import annotations

import asyncio
import os
import sys
import tempfile

from mcp import Client, StdioServerParameters


async def main() -> None:
    with tempfile.TemporaryDirectory() as workspace:
        server = StdioServerParameters(
            command=sys.executable,
            args=["-m", "contextmem.mcp", "--namespace", "alice", "--embedder", "hash", "--no-llm"],
            env={**os.environ, "CONTEXTMEM_WORKSPACE": workspace},
        )
        async with Client(server) as client:
            tools = await client.list_tools()
            print("tools:", ", ".join(sorted(t.name for t in tools.tools)))
            saved = await client.call_tool(
                "memory_write", {"text": "Launch moved to March 3.", "target": "core"}
            )
            print("memory_write:", saved.content[0].text)
            found = await client.call_tool("memory_search", {"query": "when is the launch?"})
            hit = (found.structured_content or {})["hits"][0]  # the same hits as JSON text in found.content
            print(
                f"memory_search: {hit['path']} lines {hit['start_line']}-{hit['end_line']}: {hit['snippet']}"
            )
            refused = await client.call_tool("memory_get", {"path": "../../etc/passwd"})
            print("memory_get outside the workspace refused:", refused.is_error)


if __name__ == "__main__":
    asyncio.run(main())
