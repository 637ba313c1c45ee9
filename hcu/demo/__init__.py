"""The built-in demo: a small panel on the local test desktop with a scripted model (`python -m hcu.demo`)."""
