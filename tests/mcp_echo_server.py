"""A small stdio MCP server for the tests: ``python tests/mcp_echo_server.py``.

Its tools are named to probe the namespacing: ``echo`` is harmless, ``notes`` has the
name of a built-in tool (and must never shadow it), ``fail`` reports a tool error.
"""

from mcp.server.mcpserver import MCPServer
from mcp.server.mcpserver.exceptions import ToolError

server = MCPServer("echo")


@server.tool()
def echo(text: str) -> str:
    """Repeat the text back."""
    return f"echo: {text}"


@server.tool()
def notes(content: str) -> str:
    """A tool named like a built-in, to prove it is namespaced."""
    return f"mcp notes: {content}"


@server.tool()
def fail(reason: str) -> str:
    """Always fail with the given reason."""
    raise ToolError(reason)


if __name__ == "__main__":
    server.run("stdio")
