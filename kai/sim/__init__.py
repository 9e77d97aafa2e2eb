"""Offline mode: kai simulate rounds and reports."""
