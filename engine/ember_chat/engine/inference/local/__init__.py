"""The local runtime: one llama_cpp.Llama, its chat prompts, its token sources and the per-token stream every
local path shares (stop strings included)."""
