"""Long-term memory: facts as Markdown files with Git history, indexed per user, reconciled per chat turn."""
