DATABASE = "/var/lib/invoices/prod.sqlite3"
