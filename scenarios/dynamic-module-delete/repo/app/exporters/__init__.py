"""Export formats. Which ones exist is decided by config/exporters.ini."""
