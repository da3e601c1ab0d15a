"""Inference: the backend protocol, the local llama.cpp runtime, events, metrics, prompting, parameters."""
