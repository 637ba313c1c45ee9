"""The names of the files an attempt leaves in its folder (`tasks/<task>/`, `retries/<task>-<n>/`), written by the
runner and read by the queue, summarize, the viewer and the exports."""

LEASE_FILE = "attempt.json"
"""The runner's lease, written before anything else (`records.lease`)."""
RESULT_FILE = "result.json"
"""The outcome (`records.result.TaskResult`), written last."""
META_FILE = "meta.json"
"""What the attempt ran on and what each phase saw (`attempt.meta.AttemptMeta`)."""
TRAJECTORY_FILE = "trajectory.json"
"""The attempt's steps in ATIF (`evidence.atif`)."""
TURN_EVENTS = "phase-agent-turn-{turn}-events.jsonl"
"""The agent CLI's event stream of one turn (turn 1, then one per session resume)."""
