"""Anthropic's Messages API wire format as Ember's API server speaks it (serve/messages_route.py): a
/v1/messages body read as the chat route's request (messages_input.py), and the Message, its streamed
events and errors in Anthropic's shapes (messages_output.py)."""
