"""The OSWorld side of the process boundary: code that runs in the OSWorld interpreter, never in hcu's process
(`python -m hcu.osworld.osworld_bridge.child`). Standard library and OSWorld's own imports only."""
