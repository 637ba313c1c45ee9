"""Running OSWorld tasks. The commands users call live here; everything else has a room named for what it is:

- `run_task`, `run_queue`, `ctl`, `setup_canary`, `canary_sweep`, `summarize`, `cleanup`, `evaluator_check`,
  `export`: the `python -m hcu.osworld.<command>` shells.
- `settings.py` (the fields that are both run_task's flags and a run config's keys; every default is in
  `hcu/defaults.py` or, for one agent, in its adapter's declaration), `run_config.py` (a panel's config: those
  settings plus the panel's own keys, read by the queue, the summary, the demo and the viewer), `errors.py` (the one
  error-policy table: what is retried, scored or withheld).
- `records/`: the attempt's vocabulary at the bottom (identity, result.json, the lease, file names, cost and
  usage, the signals that end an attempt, a run's manifest.json, a canary sweep's sweep.json); it imports nothing
  above it, and no loop closes among the rooms (docs/contributing.md draws them by floor).
- `guest/`: where a guest is started, gated on readiness and removed (Docker, in-guest API, ports, overlays,
  the host's KVM and memory).
- `attempt/`: the top floor: the runner and the phases of one attempt (isolate, upload, setup, probe, agent,
  evaluate), meta.json, and the node's per-phase caps the runner holds (`node_admission.py`).
- `agents/`: one adapter per agent CLI, each declaring what is known about its CLI (provider, defaults, files and
  their recipes, inherited configuration), registered in one line; the fetch step (`make agents`) reads them.
- `osworld_bridge/`: where OSWorld's own setup and evaluator code is called: in its own process (`child/`, run by
  the OSWorld interpreter) over a versioned protocol (`protocol.py`, `process.py`), with the task definitions
  (`tasks.py`) and the asset cache.
- `canary/`: the canary sweep over a task index and its reports (`sweep.json`, `sweep.md`).
- `queue/`: the panel queue (scheduling, resume, retries, manifest, how many attempts run at once, `ctl`'s
  commands) and its executors: `local` (this host's Docker engine) or `ray` (each node its own guests, gateway and
  per-phase caps; results merged at the head).
- `quota/`: the campaign's forecast from earlier runs (tokens, calls, time, cost), the `quota` a run names, and
  the rule that admits attempts by it under `"max_active_tasks": "auto"`.
- `live/`: what a running queue shows its operator: the terminal view, or one plain line per event.
- `stand_ins/`: generated task files for offline checks (never part of a scored run).
- `summary/`: scores, intervals and reports of a run.
- `evidence/`: what an attempt keeps to explain its score (trajectory.json in ATIF, step screenshots, the screen
  recording) and the exports to OSWorld's own result layout and to a Harbor job (`harbor view`).
- `view/`: the run viewer (`python -m hcu.osworld.view`): a run directory as pages, served or exported.
"""
