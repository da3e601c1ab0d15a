"""Where the tests and the repository are, for tests in any folder under tests/."""

from pathlib import Path

TESTS = Path(__file__).resolve().parents[1]
REPO = TESTS.parent
