"""What an attempt keeps to explain its score: the step-level trajectory (ATIF, `atif.py`) and its screenshots, and
the exports of a run to other tools' layouts (OSWorld's result folders, a Harbor job)."""
