"""Order export: turn the day's orders into files for other teams."""
