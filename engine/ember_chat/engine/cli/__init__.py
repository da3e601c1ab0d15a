"""The `ember-chat` command line, one module per command group."""
