"""Fakes that are real implementations of what they stand in for, served over HTTP."""
