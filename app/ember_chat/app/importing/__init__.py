"""File ▸ Import chats: ChatGPT and Ember exports."""
