"""Quota as the campaign's resource: what one attempt uses (profile.py, from earlier runs), what the quota allows
(limits.py), what a campaign will take in tokens, calls, time and money (forecast.py; the wall time's bounds:
wall.py), and how many attempts to run at once under "max_active_tasks": "auto" (admission.py, from what the
gateways report: gateway_reading.py). The queue imports this room; nothing here imports the queue."""
