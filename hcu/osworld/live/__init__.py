"""Watching a running queue: its figures in words (figures.py, with the score so far and its interval, score.py),
the terminal view (terminal.py) and the plain-line log (plain.py) that run_queue shows while it runs, chosen by
whether its output is a terminal (watch.py)."""
