"""The serving lab: how many people a model on this machine can serve at once.

A load generator drives an OpenAI-compatible server (Ember's own, llama-server, vLLM, Ollama…) with a
workload (workload.py) at a fixed concurrency (closed loop) or at a request rate with Poisson or bursty
gamma arrivals (open loop, load.py); each request is one streamed chat completion timed here
(client.py); the figures serving engineers use — TTFT, ITL, TPOT, end-to-end latency, throughput and
goodput under a latency objective — are computed per run (summary.py), with a plain answer first."""
