"""Image encode time through llama.cpp's mtmd, in Ember's runtime: the tiny vision model the tests
make (a tiny LLM plus a Gemma-3-type projector, 56 px images, 4 image tokens) unless a real model and
its projector are given. Each run sends a new image (a new sha256: encoded), then asks again after
clearing the KV cache (the embedding comes from Ember's cache: not encoded again). Prints JSON:

    python -m bench.vision --json
    python -m bench.vision --model gemma-3-4b-it-Q4_K_M.gguf --mmproj mmproj-model-f16.gguf --runs 5 --json
"""

from __future__ import annotations

import argparse
import io
import json
import os
import platform
import statistics
import tempfile
from pathlib import Path

from PIL import Image

from ember_chat.engine.core.messages import ChatMessage, ImageInput
from ember_chat.engine.core.params import LoadConfig, SamplingParams, default_threads
from ember_chat.engine.inference.events import Finished
from ember_chat.engine.inference.local.runtime import LocalRuntime
from ember_chat.engine.inference.metrics import GenerationMetrics, percentile

PARAMS = SamplingParams(temperature=0.0, max_tokens=4, seed=1)


def image(i: int, size: int) -> ImageInput:
    buf = io.BytesIO()
    Image.new("RGB", (size, size), ((37 * i) % 256, (91 * i) % 256, (53 * i) % 256)).save(buf, "PNG")
    return ImageInput.from_bytes(buf.getvalue(), f"bench-{i}.png")


def ask(rt: LocalRuntime, messages: list[ChatMessage]) -> GenerationMetrics:
    done = [e for e in rt.chat(messages, PARAMS) if isinstance(e, Finished)]
    return done[-1].metrics


def measure(model: Path, mmproj: Path, runs: int, threads: int, size: int) -> dict[str, object]:
    rt = LocalRuntime()
    rt.load(LoadConfig(model, mmproj=mmproj, n_ctx=4096, threads=threads))
    try:
        ask(rt, [ChatMessage("user", "warm up", images=(image(0, size),))])
        encode, ttft_new, ttft_cached = [], [], []
        for i in range(1, runs + 1):
            rt.reset_cache()
            question = [ChatMessage("user", "What is in this picture?", images=(image(i, size),))]
            first = ask(rt, question)
            rt.reset_cache()
            again = ask(rt, question)
            assert first.image_encode_ms is not None and again.image_encode_ms == 0.0
            encode.append(first.image_encode_ms)
            ttft_new.append((first.ttft_s or 0.0) * 1e3)
            ttft_cached.append((again.ttft_s or 0.0) * 1e3)
        description = rt.description
    finally:
        rt.close()
    assert description is not None

    def stats(values: list[float]) -> dict[str, float]:
        return {"median": round(statistics.median(values), 3), "p95": round(percentile(values, 95) or 0.0, 3)}

    return {
        "model": description.name,
        "projector": mmproj.name,
        "image_px": size,
        "runs": runs,
        "threads": threads,
        "image_encode_ms": stats(encode),
        "ttft_new_image_ms": stats(ttft_new),
        "ttft_cached_embedding_ms": stats(ttft_cached),
        "machine": platform.machine(),
        "cpu_count": os.cpu_count(),
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--model", type=Path, help="a vision model (default: the tiny one the tests make)")
    ap.add_argument("--mmproj", type=Path, help="its projector (with --model)")
    ap.add_argument("--runs", type=int, default=10)
    ap.add_argument("--threads", type=int, default=default_threads())
    ap.add_argument("--image-px", type=int, default=640, help="side of the square test image sent")
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args()
    with tempfile.TemporaryDirectory(prefix="ember-bench-vision-") as folder:
        if args.model is None:
            from tests.helpers.vision_factory import write_tiny_vision_model

            model, mmproj = write_tiny_vision_model(Path(folder))
        else:
            if args.mmproj is None:
                ap.error("--model needs --mmproj")
            model, mmproj = args.model, args.mmproj
        result = measure(model, mmproj, args.runs, args.threads, args.image_px)
    if args.json:
        print(json.dumps(result))
    else:
        for key, value in result.items():
            print(f"{key}: {value}")


if __name__ == "__main__":
    main()
