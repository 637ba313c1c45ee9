"""Stand-in task files, for offline machines and CI only: the one room that knows how to make them.

A task names its files by URL (mostly Hugging Face); without the internet, `--asset-stand-ins` serves each as a
generated file of the type the task expects. `source.py` is the asset source setup and evaluation receive (a
marked cache of its own, filled before they read it), and `asset_source.py` the choice between it and the cache
of real files that the commands hand to the attempt runner (which never names a stand-in); `plan.py` says which
files a task needs; `generate.py` runs in the OSWorld interpreter and writes them (`files.py`, with `archives.py`
and `gold.py`). Whatever runs on stand-ins is marked (`stand_ins: true`), and run_queue and summarize refuse it.
"""
