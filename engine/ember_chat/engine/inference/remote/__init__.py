"""A model on an OpenAI-compatible server: the backend, its HTTP client and wire, the request it sends, tool
calls in OpenAI's shapes, and its metrics."""
