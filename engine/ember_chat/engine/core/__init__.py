"""The vocabulary every layer of the engine shares: parameters, messages, model references,
thinking markers. It imports no other engine package."""
