"""The setup canary's parts: application checks after setup steps, stand-in assets, and the sweep over a task
index (`python -m hcu.osworld.setup_canary` and `python -m hcu.osworld.canary_sweep` are the commands)."""
