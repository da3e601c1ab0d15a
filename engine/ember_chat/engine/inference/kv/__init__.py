"""Conversation caches: the prefix a prompt shares with the KV cache, and saved snapshots of a conversation's
sequence (their keys, their files, sequence 0's)."""
