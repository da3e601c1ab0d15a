"""The conversation: the controller that sends a message and saves its answer, the tool loop, the composer and
the files attached in it."""
