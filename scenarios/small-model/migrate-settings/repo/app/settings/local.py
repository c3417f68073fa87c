DATABASE = "dev.sqlite3"
