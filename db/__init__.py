"""The results store (import as kernelbench.db): SQLAlchemy schema, migrations and the default
database file."""
