"""The engine service: the one backend on its own thread, the fair queue every client shares, a request's run,
the model it holds, and a model's name resolved to what a backend loads."""
