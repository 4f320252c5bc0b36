//! Editing webhook configurations while a replay is loaded: validation, saving, recovery, re-dispatch and what changed.
