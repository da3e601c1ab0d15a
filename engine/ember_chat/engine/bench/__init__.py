"""The benchmark lab: how fast a model runs on this machine, measured the way llama-bench does."""
