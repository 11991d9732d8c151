"""Sources (where a value came from) and guards (what must still hold for a plan to be reused)."""
