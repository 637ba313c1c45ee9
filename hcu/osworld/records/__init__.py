"""The attempt's vocabulary, at the bottom of hcu.osworld: its identity (`identity`), the records it leaves
(`result`, `lease`, `layout`), what its model calls cost and used (`cost`, `usage`) and the signals that end it
(`interrupts`); and two records of other writers: a run's manifest.json (`manifest`: what its number depends on,
written by the queue, read by the viewer) and a canary sweep's sweep.json (`sweep_file`, which the canary writes
and a run's do-nothing baseline reads). Every other room reads these; this room imports nothing of hcu.osworld
above it."""
