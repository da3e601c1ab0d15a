"""OpenAI's wire format, both ways: the JSON bodies Ember's API server reads and writes, and those its
remote backend sends and reads from another server. Shapes only, in the engine's terms (core's messages,
sampling parameters, tools, log-probabilities): the HTTP server, its guards and its answering stay in
serve/, and so does reading a request's files (serve/file_reading.py); the HTTP client, its retries and
its connection checks in inference/remote/.

Imported as `ember_chat.engine.openai` (absolute imports only), so it never shadows the `openai`
client package.

- chat_request.py: what a chat-completions or completions body may carry, as the server reads it
- responses.py: the server's responses and stream chunks, their finish_reason and usage (and reading
  another server's chunks, read_chunk)
- api_error.py: OpenAI's error body (the error Ember answers with; a server's own words read from one)
- content_parts.py: a message's content parts (read from a request, each file and image handed to the
  server's reader; written for a remote server)
- tool_wire.py: tools, tool_choice and tool calls in requests, history and answers
- logprobs.py: log-probabilities in chat's and the completions API's shapes
- remote_request.py: the chat-completions request the remote backend sends
- models_list.py: a `GET /models` answer (Ember's own, written; another server's, read)
"""
