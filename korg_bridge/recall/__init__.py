"""korg-recall: cross-session memory over agent ledgers, as an introspect-aware binary."""
