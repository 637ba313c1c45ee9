"""A guest's state as an artefact: this host's cache of ready-to-run snapshots that attempts start from
(snapshots.py, start.py), and an attempt's final desktop kept beside its results (kept.py) to regrade it or open it
again without the agent. The mechanics of saving and restoring a machine are the guest's (guest/machine_state.py);
this room decides when, keeps the files and says in the records what happened."""
