"""A worker the G4 test SIGKILLs inside node n2: ``python sigkill_worker.py SPEC``.

SPEC is JSON: ``url``, ``options``, ``thread``, ``ttl_ms`` and ``reached`` (a file
the worker creates once it is inside n2, after n1's checkpoint is durable).
"""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path

from rulvar_conformance.suites.langgraph_ownership import three_node_graph
from rulvar_langgraph import RulvarSaver


def main(spec_text: str) -> None:
    spec = json.loads(spec_text)

    def park() -> None:
        Path(spec["reached"]).write_text("in n2")
        while True:  # until SIGKILL
            time.sleep(1)

    options = {**spec["options"], "ttl_ms": spec["ttl_ms"]}
    with RulvarSaver.from_url(spec["url"], owner="worker-killed", **options) as saver:
        graph = three_node_graph(saver, "worker-killed", stall=park)
        with saver.hold(spec["thread"]) as config:
            graph.invoke({"trail": []}, config, durability="sync")


if __name__ == "__main__":
    main(sys.argv[1])
