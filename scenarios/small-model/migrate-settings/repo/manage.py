"""The project's management commands: `python manage.py migrate --settings=<module>`."""

import argparse
import importlib
import sqlite3
import sys

parser = argparse.ArgumentParser(prog="manage.py")
parser.add_argument("command", choices=["migrate", "check"])
parser.add_argument("--settings", help="settings module, e.g. app.settings.production")
args = parser.parse_args()
if not args.settings:
    sys.exit("manage.py: no settings module given: pass --settings=app.settings.<name> (one of app/settings/*.py)")
settings = importlib.import_module(args.settings)
if args.command == "check":
    print(f"settings {args.settings}: database {settings.DATABASE}")
    sys.exit(0)
with sqlite3.connect(settings.DATABASE) as db:
    db.execute("CREATE TABLE IF NOT EXISTS users (id INTEGER PRIMARY KEY, name TEXT NOT NULL)")
    db.execute("CREATE TABLE IF NOT EXISTS invoices (id INTEGER PRIMARY KEY, user_id INTEGER, total REAL)")
print(f"migrated {settings.DATABASE}")
