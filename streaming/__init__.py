"""Structured Streaming jobs: live cluster state and anomaly alerts from the change records."""
