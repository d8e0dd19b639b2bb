"""The offer search language: ``vastui.vast.query`` against the official vastai 1.9.1 parser, on realistic queries.

What it measures: the time to turn a ``vastai search offers`` query string into the JSON body sent to the API, per
query, for ``parse_query`` (the filters alone) and ``build_search_body`` (filters, defaults, order, type, storage).

Why this baseline: ours replaces the official CLI's ``api/query.py`` and must send the same bytes, so the honest
question is what the extra checking (error columns, kinds of values, suggestions) costs against the parser people
already run. The official parser is loaded from its file the way tests/vast/test_vast_query.py does it (the vastai
package's ``__init__`` pulls in the whole SDK), and its body is assembled with the same steps as its
``search__offers`` command, minus argparse and HTTP. Before timing, every query is checked to give byte-identical
JSON from both, so the two sides do the same work. A ratio above 1 means ours is slower.
"""

from __future__ import annotations

import contextlib
import importlib.util
import io
import json
from collections.abc import Callable
from pathlib import Path
from types import ModuleType
from typing import Any

from timing import compare, parse_options, ratio_line

from vastui.vast.query import DEFAULT_FILTERS, build_search_body, parse_query

# What people type: the examples of docs/api-notes.md and the official help, the campaign planner's shortlist queries.
QUERIES = (
    "gpu_name=RTX_4090 num_gpus=1 reliability>0.98 gpu_ram>=24 geolocation in [US,SE] cuda_vers>=12.1",
    "num_gpus>=2 num_gpus<=8 dph<3.5 inet_down>500 verified=true",
    'gpu_name in ["RTX 4090", "RTX 3090"] geolocation notin [CN,VN] driver_version >= 535.86.05 duration>7',
    "datacenter=True cpu_ram>64 disk_space>100 dph<1.5 compute_cap>=800 static_ip=true",
    "gpu_name=H100_SXM num_gpus=8 reliability>0.99 dlperf_usd>10 cuda_vers>=12.2",
    "gpu_ram>=40 pcie_bw>=20 inet_up>=200 direct_port_count>=4 rentable=any",
    "gpu_name=A100_PCIE num_gpus gte 2 dph lt 4 geolocation=US",
    "",
)
ORDER = "dlperf_usd-,dph+"
STORAGE_GIB = 20.0


def load_official() -> ModuleType:
    """vastai's ``api/query.py`` on its own."""
    spec = importlib.util.find_spec("vastai")
    if spec is None or not spec.submodule_search_locations:
        raise SystemExit("the official vastai package is not installed (pip install vastai==1.9.1)")
    path = Path(next(iter(spec.submodule_search_locations))) / "api" / "query.py"
    module_spec = importlib.util.spec_from_file_location("_official_vastai_query", path)
    assert module_spec is not None and module_spec.loader is not None
    module = importlib.util.module_from_spec(module_spec)
    module_spec.loader.exec_module(module)
    return module


def official_body(official: ModuleType, query: str) -> dict[str, Any]:
    """The body ``vastai search offers QUERY -o ORDER --storage STORAGE_GIB`` builds (cli/commands/offers.py)."""
    body: dict[str, Any] = {"verified": {"eq": True}, "external": {"eq": False}, "rentable": {"eq": True}}
    body = official.parse_query(query, body, official.offers_fields, official.offers_alias, official.offers_mult)
    order = []
    for name in ORDER.split(","):
        name = name.strip()
        direction, field = "asc", name
        if name.strip("-") != name:
            direction, field = "desc", name.strip("-")
        if name.strip("+") != name:
            direction, field = "asc", name.strip("+")
        order.append([official.offers_alias.get(field, field), direction])
    body["order"] = order
    body["type"] = "on-demand"
    body["allocated_storage"] = STORAGE_GIB
    return body


def check_same_output(official: ModuleType) -> None:
    """Both sides must send the same JSON and the official one must print nothing, or the timing compares nothing."""
    for query in QUERIES:
        said = io.StringIO()
        with contextlib.redirect_stderr(said), contextlib.redirect_stdout(said):
            theirs = official_body(official, query)
        ours = build_search_body(query, order=ORDER, storage_gib=STORAGE_GIB)
        if json.dumps(ours) != json.dumps(theirs) or said.getvalue():
            raise SystemExit(f"the parsers disagree on {query!r}:\n ours   {ours}\n theirs {theirs}\n{said.getvalue()}")


def over_queries(parse: Callable[[str], object], loops: int) -> Callable[[], None]:
    def work() -> None:
        for _ in range(loops):
            for query in QUERIES:
                parse(query)
    return work


def main() -> None:
    options = parse_options(__doc__)
    repeats, loops = (3, 5) if options.quick else (21, 200)
    ops = loops * len(QUERIES)
    official = load_official()
    check_same_output(official)

    fields, alias, mult = official.offers_fields, official.offers_alias, official.offers_mult
    filters = compare(
        over_queries(lambda q: parse_query(q, base=DEFAULT_FILTERS), loops),
        over_queries(lambda q: official.parse_query(q, {"verified": {"eq": True}, "external": {"eq": False},
                                                        "rentable": {"eq": True}}, fields, alias, mult), loops),
        repeats=repeats, ours_ops=ops, baseline_ops=ops)
    bodies = compare(
        over_queries(lambda q: build_search_body(q, order=ORDER, storage_gib=STORAGE_GIB), loops),
        over_queries(lambda q: official_body(official, q), loops),
        repeats=repeats, ours_ops=ops, baseline_ops=ops)
    print(f"# {len(QUERIES)} queries x {loops} loops, median of {repeats}; baseline: vastai 1.9.1 api/query.py")
    print(ratio_line("query.parse_query vs official parse_query", filters))
    print(ratio_line("query.build_search_body vs official search__offers body", bodies))


if __name__ == "__main__":
    main()
