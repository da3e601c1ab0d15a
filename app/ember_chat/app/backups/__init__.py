"""Settings ▸ Backups: the backups of the chat database, made and restored."""
