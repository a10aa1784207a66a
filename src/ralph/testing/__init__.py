"""Test doubles that tests and the demo use: scriptable fake agents (no model is called)."""
