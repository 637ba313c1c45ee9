"""What an attempt keeps to explain its score: the step-level trajectory (ATIF, `atif.py`) and its screenshots."""
