"""Ralph runs AI coding agents in a verified loop and records everything in an event log."""

__version__ = "0.1.0"
