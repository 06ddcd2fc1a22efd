"""What several commands share and only a command line needs: opening the results store with its
error as a one-line click message."""
from __future__ import annotations

import click


def open_store(db: str | None):
    """The Store at `db` (None: $KERNELBENCH_DB or the user data directory); a StoreError ends the command."""
    from kernelbench.db.store import Store, StoreError
    try:
        return Store(db)
    except StoreError as e:
        raise click.ClickException(str(e)) from None
