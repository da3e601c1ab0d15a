"""llama-cpp-python's own server, as `python -m llama_cpp.server` starts it, except that llama.cpp's extra CPU
buffers are chosen as Ember chooses them (engine/inference/llama/amx_probe.py): on a machine whose CPU announces
AMX but cannot run llama.cpp's AMX kernels, the server died with SIGILL at its first prompt, and the tests
and benchmarks that compare Ember with it had no peer. Run as `python -m tests.helpers.llama_cpp_server
--model PATH ...` with the server's own options."""

from __future__ import annotations

import runpy
import sys
from pathlib import Path

import llama_cpp
import llama_cpp.llama

from ember_chat.engine.inference.llama.amx_probe import extra_buffers_usable


def main() -> None:
    usable = extra_buffers_usable(Path(sys.argv[sys.argv.index("--model") + 1]))
    module = llama_cpp.llama.llama_cpp
    original = module.llama_model_default_params

    def with_buffers() -> llama_cpp.llama_model_params:
        params = original()
        params.use_extra_bufts = usable
        return params

    module.llama_model_default_params = with_buffers
    runpy.run_module("llama_cpp.server", run_name="__main__", alter_sys=True)


if __name__ == "__main__":
    main()
