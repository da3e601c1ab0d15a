"""llama.cpp's own machinery as llama-cpp-python binds it: loading a model (and the AMX probe), its log, batched
decoding, a sequence's state, greedy decoding, logit bias, log-probabilities, images (libmtmd)."""
