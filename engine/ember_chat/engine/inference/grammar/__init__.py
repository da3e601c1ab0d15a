"""Structured output: GBNF grammars for JSON and JSON schemas, what a grammar or a schema may cost before
llama.cpp sees it, sampling under a grammar, and checking an answer against its schema."""
