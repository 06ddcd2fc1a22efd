"""The results store (import as kernelbench.db), the one door to the database: store.py (Store, a named
method per record kind), schema.py, migrations.py, errors.py, paths.py (the user data directory),
values.py (canonical JSON, UTC times) and the default database file."""
