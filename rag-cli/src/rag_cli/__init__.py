"""Command line for people: run the stack, ingest files, search."""
