"""Public HTTP API of the shop."""
