"""A stdio MCP server whose tools answer in the shapes beside plain text (an image with a caption, a
resource), and one tool whose name chat templates refuse (a space), which Ember skips with a note."""

from __future__ import annotations

import base64

from mcp.server.mcpserver import MCPServer
from mcp_types import EmbeddedResource, ImageContent, TextContent, TextResourceContents

server = MCPServer("shapes")


@server.tool(description="A caption and a picture.", structured_output=False)
def picture() -> list[TextContent | ImageContent]:
    dot = base64.b64encode(b"\x89PNG\r\n\x1a\n" + bytes(92)).decode()
    return [TextContent(type="text", text="a red dot"), ImageContent(type="image", data=dot, mime_type="image/png")]


@server.tool(description="A text resource.", structured_output=False)
def document() -> list[EmbeddedResource]:
    text = TextResourceContents(uri="file:///notes/a.txt", text="the resource's text", mime_type="text/plain")
    return [EmbeddedResource(type="resource", resource=text)]


@server.tool(name="look around", description="A name chat templates refuse (a space).")
def look_around() -> str:
    return "never offered"


if __name__ == "__main__":
    server.run()
