"""Issue 17: bench.vision measures the image encode time through Ember's runtime (tiny vision model)."""

from __future__ import annotations

from pathlib import Path

from bench.vision import measure
from tests.helpers.vision_factory import write_tiny_vision_model


def test_the_vision_bench_reports_encode_time_and_the_cached_path(tmp_path: Path) -> None:
    model, mmproj = write_tiny_vision_model(tmp_path)
    result = measure(model, mmproj, runs=2, threads=1, size=64)
    assert result["projector"] == "mmproj-tiny-vision.gguf" and result["runs"] == 2
    encode = result["image_encode_ms"]
    assert isinstance(encode, dict) and encode["median"] > 0 and encode["p95"] >= encode["median"]
    assert isinstance(result["ttft_cached_embedding_ms"], dict)
