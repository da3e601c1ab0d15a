"""From messages to prompt text: the chat template and how it renders, the conversation fitted to the context,
tool calls and results in the template's shape, attachments expanded, control tokens kept out of text."""
