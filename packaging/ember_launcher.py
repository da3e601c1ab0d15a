"""Entry point of the packaged app (PyInstaller runs this file)."""

import sys

from ember_chat.app.launch import main

if __name__ == "__main__":
    sys.exit(main())
