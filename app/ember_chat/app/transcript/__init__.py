"""The transcript: the view of a chat's messages, the streaming answer, message and tool cards, links, keyboard
focus, a sent file's preview, the text size."""
