"""Admission webhooks."""
