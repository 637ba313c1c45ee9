"""The canary sweep over a task index (`python -m hcu.osworld.canary_sweep`): the sweep itself and its reports
(sweep.json's model is `records/sweep_file.py`, read by the summary's baseline too).
One canary is `python -m hcu.osworld.setup_canary`; the application checks it shares with run_task are in
attempt/app_check.py."""
