"""The Model Manager: discover and download, the installed models, their tables."""
