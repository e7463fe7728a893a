"""How a benchmark hands back its results: the JSON file written atomically at ``--out``, then the JSON
(``--json``) or the table on stdout."""
from __future__ import annotations

import json
from typing import Any, Callable


def emit(args, results: dict[str, Any], print_table: Callable[[dict[str, Any]], None]) -> None:
    from trajkit.atomic import write_atomic

    write_atomic(args.out, json.dumps(results, indent=2))
    if args.json:
        print(json.dumps(results, indent=2))
    else:
        print_table(results)
        print(f"wrote {args.out}")
