"""Command line: thin wiring from typer commands to library functions."""
