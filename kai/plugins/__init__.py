"""Scheduling policies, each registering hooks on the session."""
