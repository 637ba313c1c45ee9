"""Quota as the campaign's resource: what one attempt uses (profile.py, from earlier runs), what the quota allows
(limits.py), and what a campaign will take in tokens, calls, time and money (forecast.py). The queue imports this
room; nothing here imports the queue."""
