"""The speech models Ember knows and the languages Whisper understands: plain data, below storage, so
that the settings can check a saved speech model and language (engine/storage/settings.py) and the
speech package can find and load them (engine/speech/models.py)."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class SpeechModel:
    """A Whisper model Ember knows. `shipped`: installed with the starter set (else on the Hub as
    `repo`, to download). `languages`: "en" for English-only models, "99" for Whisper's multilingual set."""

    name: str
    size_mb: int  # the download (model.bin and its vocabulary), about
    languages: str
    shipped: bool = False
    repo: str = ""
    about: str = ""

    @property
    def english_only(self) -> bool:
        return self.languages == "en"


DEFAULT_MODEL = "tiny.en"
KNOWN_MODELS: tuple[SpeechModel, ...] = (
    SpeechModel(
        "tiny.en",
        78,
        "en",
        shipped=True,
        repo="Systran/faster-whisper-tiny.en",
        about="shipped with the starter set: dictation with no download",
    ),
    SpeechModel("base.en", 145, "en", repo="Systran/faster-whisper-base.en", about="English, more accurate"),
    SpeechModel("base", 145, "99", repo="Systran/faster-whisper-base", about="multilingual"),
    SpeechModel("small", 484, "99", repo="Systran/faster-whisper-small", about="multilingual, accurate, slower"),
    SpeechModel(
        "distil-large-v3",
        1510,
        "en",
        repo="Systran/faster-distil-whisper-large-v3",
        about="English, near large-v3 accuracy at a fraction of its time",
    ),
    SpeechModel(
        "large-v3-turbo",
        1620,
        "99",
        repo="mobiuslabsgmbh/faster-whisper-large-v3-turbo",
        about="multilingual, the most accurate here; needs a fast CPU or a GPU",
    ),
)
# names OpenAI's clients send for "the speech model" (an API client cannot be told Ember's names)
ALIASES = {"whisper-1": DEFAULT_MODEL, "tiny": DEFAULT_MODEL}


def known(name: str) -> SpeechModel | None:
    return next((m for m in KNOWN_MODELS if m.name == ALIASES.get(name, name)), None)


# Whisper's languages (its tokenizer's table: code → name, in its order; "yue" since large-v3). A
# multilingual model understands them all; an English-only (.en) model English alone.
WHISPER_LANGUAGES: dict[str, str] = {
    "en": "English",
    "zh": "Chinese",
    "de": "German",
    "es": "Spanish",
    "ru": "Russian",
    "ko": "Korean",
    "fr": "French",
    "ja": "Japanese",
    "pt": "Portuguese",
    "tr": "Turkish",
    "pl": "Polish",
    "ca": "Catalan",
    "nl": "Dutch",
    "ar": "Arabic",
    "sv": "Swedish",
    "it": "Italian",
    "id": "Indonesian",
    "hi": "Hindi",
    "fi": "Finnish",
    "vi": "Vietnamese",
    "he": "Hebrew",
    "uk": "Ukrainian",
    "el": "Greek",
    "ms": "Malay",
    "cs": "Czech",
    "ro": "Romanian",
    "da": "Danish",
    "hu": "Hungarian",
    "ta": "Tamil",
    "no": "Norwegian",
    "th": "Thai",
    "ur": "Urdu",
    "hr": "Croatian",
    "bg": "Bulgarian",
    "lt": "Lithuanian",
    "la": "Latin",
    "mi": "Maori",
    "ml": "Malayalam",
    "cy": "Welsh",
    "sk": "Slovak",
    "te": "Telugu",
    "fa": "Persian",
    "lv": "Latvian",
    "bn": "Bengali",
    "sr": "Serbian",
    "az": "Azerbaijani",
    "sl": "Slovenian",
    "kn": "Kannada",
    "et": "Estonian",
    "mk": "Macedonian",
    "br": "Breton",
    "eu": "Basque",
    "is": "Icelandic",
    "hy": "Armenian",
    "ne": "Nepali",
    "mn": "Mongolian",
    "bs": "Bosnian",
    "kk": "Kazakh",
    "sq": "Albanian",
    "sw": "Swahili",
    "gl": "Galician",
    "mr": "Marathi",
    "pa": "Punjabi",
    "si": "Sinhala",
    "km": "Khmer",
    "sn": "Shona",
    "yo": "Yoruba",
    "so": "Somali",
    "af": "Afrikaans",
    "oc": "Occitan",
    "ka": "Georgian",
    "be": "Belarusian",
    "tg": "Tajik",
    "sd": "Sindhi",
    "gu": "Gujarati",
    "am": "Amharic",
    "yi": "Yiddish",
    "lo": "Lao",
    "uz": "Uzbek",
    "fo": "Faroese",
    "ht": "Haitian Creole",
    "ps": "Pashto",
    "tk": "Turkmen",
    "nn": "Nynorsk",
    "mt": "Maltese",
    "sa": "Sanskrit",
    "lb": "Luxembourgish",
    "my": "Myanmar",
    "bo": "Tibetan",
    "tl": "Tagalog",
    "mg": "Malagasy",
    "as": "Assamese",
    "tt": "Tatar",
    "haw": "Hawaiian",
    "ln": "Lingala",
    "ha": "Hausa",
    "ba": "Bashkir",
    "jw": "Javanese",
    "su": "Sundanese",
    "yue": "Cantonese",
}


def model_languages(name: str) -> tuple[str, ...]:
    """The language codes the known model `name` understands (() for a name Ember does not know)."""
    model = known(name)
    if model is None:
        return ()
    return ("en",) if model.english_only else tuple(WHISPER_LANGUAGES)


__all__ = ["ALIASES", "DEFAULT_MODEL", "KNOWN_MODELS", "WHISPER_LANGUAGES", "SpeechModel", "known", "model_languages"]
