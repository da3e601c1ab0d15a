"""Projects: a chat-list folder with instructions, knowledge and defaults (issue 34)."""
