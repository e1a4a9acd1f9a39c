"""The fuzz harness: mutators, the checks every input must pass, and the long run."""
