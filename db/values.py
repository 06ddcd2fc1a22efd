"""Plain values the schema stores and its readers compare (no SQLAlchemy here, so that modules
outside db/ can use them): the canonical JSON text of a value, and the naive-UTC time of a row."""
from __future__ import annotations

import datetime as _dt
import json
from typing import Any


def utcnow() -> _dt.datetime:
    return _dt.datetime.now(_dt.timezone.utc).replace(tzinfo=None)


def _default(o: Any):
    """JSON for the values results carry: tuples, numpy/torch scalars, dtypes and the like."""
    if hasattr(o, "item") and callable(o.item):
        return o.item()
    if isinstance(o, (set, frozenset)):
        return sorted(o)
    return str(o)


def canonical_json(obj: Any) -> str:
    """The one text form of a JSON value: sorted keys, compact separators. NaN/inf are kept as
    JSON's extensions (NaN, Infinity) because error statistics can legitimately be infinite."""
    return json.dumps(obj, sort_keys=True, separators=(",", ":"), default=_default)
