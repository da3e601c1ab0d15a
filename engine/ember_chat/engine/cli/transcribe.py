"""`ember-chat transcribe FILE`: a recording's words (engine/speech), with --json its segments, times
and speed. The speech engine (faster-whisper) is imported when the command runs."""

from __future__ import annotations

import argparse
import json
import sys

from ember_chat.engine.errors import InvalidParameter


def add_parser(sub: argparse._SubParsersAction) -> None:
    tr = sub.add_parser("transcribe", help="speech to text: a WAV, MP3, M4A, OGG or FLAC file's words")
    tr.add_argument("file")
    model_help = (
        "a speech model: tiny.en (shipped with the starter set), one downloaded in the Model Manager "
        "(base.en, base, small, distil-large-v3, large-v3-turbo), or a CTranslate2 Whisper model's folder"
    )
    tr.add_argument("--model", default="tiny.en", help=model_help)
    tr.add_argument("--language", default="auto", help="a language code (en, fr …) or auto (the default)")
    tr.add_argument("--vad", action="store_true", help="trim silence first (voice-activity detection)")
    tr.add_argument("--threads", type=int, help="CPU threads (default: the cores this process may use)")
    json_help = "text, segments with start/end, language, duration, real-time factor, model, threads"
    tr.add_argument("--json", action="store_true", help=json_help)


def run(args: argparse.Namespace) -> int:
    from ember_chat.engine.speech import Transcriber, decode

    if args.threads is not None and args.threads < 1:
        raise InvalidParameter("--threads must be at least 1.")
    samples = decode(args.file)  # (before the model: a bad file is told at once)
    transcriber = Transcriber(args.model, threads=args.threads)
    transcript = transcriber.transcribe(samples, language=args.language, vad=args.vad)
    if args.json:
        json.dump(transcript.to_dict(), sys.stdout, indent=2, ensure_ascii=False)
        sys.stdout.write("\n")
    else:
        print(transcript.text)
    return 0
