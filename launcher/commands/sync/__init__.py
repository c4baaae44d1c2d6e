"""`sync models` and `sync images`: what to copy, the copy, the relay."""
