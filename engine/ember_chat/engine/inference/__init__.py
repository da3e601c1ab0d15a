"""Inference: the backend protocol (backend.py), the events every generation yields (events.py), its
metrics (metrics.py), comparing models (compare.py) and the engine's wording (wording.py); in
sub-packages, llama.cpp's machinery (llama/), structured output (grammar/), conversation caches (kv/),
the local runtime (local/), prompts (prompt/), tool calls in an answer (calls/), the engine service
(service/) and remote servers (remote/)."""
