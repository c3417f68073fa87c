"""The command-line adapter: thin commands over the core, one error boundary."""
