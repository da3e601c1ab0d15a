"""What Ember keeps on disk: conversations (SQLite), settings, secrets (keychain), paths, export."""
