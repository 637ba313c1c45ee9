"""Regrading: a run's kept final desktops scored again by their tasks' evaluators as they are now, without the agent
and without a model call (`python -m hcu.osworld.regrade`)."""
