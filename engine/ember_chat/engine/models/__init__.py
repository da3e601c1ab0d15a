"""Model files: GGUF inspection, the library, fit estimates, the Hub client, downloads, the starter model."""
