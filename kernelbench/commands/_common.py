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


def where_option(fn):
    """`--where KEY=V1,V2` (repeatable): only the cases whose params match every KEY (bench, tune)."""
    def parse(ctx, param, value):
        from kernelbench.harness.bench import parse_where
        try:
            return parse_where(value)
        except ValueError as e:
            raise click.BadParameter(str(e)) from None
    return click.option("--where", "where", multiple=True, callback=parse, metavar="KEY=V[,V...]",
                        help="only cases whose params match, e.g. --where M=16,64 --where N=256 (repeatable: all "
                             "must match)")(fn)


def require_match(ops, where, matched: bool) -> None:
    """A --where that selects no case is a typo or a key the ops lack: say so instead of running nothing."""
    if where and not matched:
        from kernelbench.harness.bench import describe_where
        raise click.ClickException(f"no case of {' '.join(ops) or 'any op'} matches {describe_where(where)}")
