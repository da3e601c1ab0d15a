"""The window's projects (issue 34): a chat-list folder with instructions, defaults and knowledge."""
