"""Tools a model may call: Ember's built-in tools, MCP servers, the consent and the calls of one chat."""
