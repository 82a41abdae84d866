"""Does korg-recall find what a developer asks of real past sessions?

    python bench/transcript_queries.py                   # hit@5 for keyword and auto; records docs/benchmarks.md
    python bench/transcript_queries.py --no-write        # print only
    python bench/transcript_queries.py --save-baseline   # also keep these figures as the "before" to compare with

The corpus is the real Claude Code and Codex transcripts of
``../shared/peers/transcripts`` (copied to a temp dir, the gzipped one unpacked;
absent: "optional peer data not found", nothing measured). The questions are
``bench/golden/transcript_queries.json``: 30 queries, each naming the event it
should find (a Claude Code line by its ``uuid``, a Codex line by its number),
written from reading the transcripts before any query ran.

Each query runs as a fresh ``korg-recall recall --json --top-n 5 --kinds history``
process in ``keyword`` and ``auto`` mode (auto is hybrid once a local model has
embedded the index: ``korg-recall index`` embeds everything first when one is
configured, e.g. ``KORG_RECALL_MODEL_DIR``; else auto is keyword). Each hit's
ref is resolved to its file and line with ``korg-recall show``; a query scores
when one of its targets is among the five hits (hit@5), and MRR@5 says how high.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

import _common as common
import recall_bench as rb
import semantic_bench as sb

SECTION = "transcript_queries"
QUERIES = Path(__file__).resolve().parent / "golden" / "transcript_queries.json"
BASELINE = Path(__file__).resolve().parent / "golden" / "transcript_baseline.json"
MODES = ("keyword", "auto")
TOP = 5
NOT_FOUND = "optional peer data not found"


@dataclass(slots=True)
class Query:
    id: str
    text: str
    targets: set[tuple[str, int]]
    """(file relative to the transcripts folder, 1-based line) of each acceptable event."""


@dataclass(slots=True)
class Outcome:
    query: Query
    ranks: dict[str, int | None] = field(default_factory=dict)
    """Mode → 1-based rank of the first target among the hits (None: not in the top five)."""
    used: dict[str, str] = field(default_factory=dict)
    """Mode asked → the mode the answer says ran (auto becomes keyword or hybrid)."""


def load_queries(root: Path, path: Path = QUERIES) -> list[Query]:
    """The query set, each target resolved to its line in the copy under ``root``.

    Raises:
        ValueError: a target names a file or uuid the transcripts do not hold.
    """
    doc = json.loads(path.read_text(encoding="utf-8"))
    lines_of: dict[str, dict[str, int]] = {}
    queries = []
    for item in doc["queries"]:
        targets: set[tuple[str, int]] = set()
        for target in item["targets"]:
            name = target["file"]
            if "line" in target:
                targets.add((name, int(target["line"])))
                continue
            if name not in lines_of:
                try:
                    text = (root / name).read_text(encoding="utf-8")
                except OSError as exc:
                    raise ValueError(f"{item['id']}: cannot read {name}: {exc}") from exc
                lines_of[name] = {}
                for number, line in enumerate(text.splitlines(), 1):
                    try:
                        uuid = json.loads(line).get("uuid")
                    except (ValueError, AttributeError):
                        continue
                    if isinstance(uuid, str):
                        lines_of[name][uuid] = number
            if target["uuid"] not in lines_of[name]:
                raise ValueError(f"{item['id']}: no line with uuid {target['uuid']} in {name}")
            targets.add((name, lines_of[name][target["uuid"]]))
        queries.append(Query(item["id"], item["query"], targets))
    return queries


def where_hits_are(recall: rb.Recall, root: Path, refs: list[str]) -> list[tuple[str, int]]:
    """(file relative to ``root``, line) of each ref, in order, through ``korg-recall show``."""
    if not refs:
        return []
    found: dict[str, tuple[str, int]] = {}
    answer = json.loads(recall.must("show", *refs, "--limit", "1000").out)
    for event in answer["events"]:
        found[event["ref"]] = (Path(event["source"]).relative_to(root).as_posix(), int(event["seq"]))
    for ref in refs:  # an event the answer had no room for: on its own
        if ref not in found:
            [event] = json.loads(recall.must("show", ref, "--limit", "1000").out)["events"]
            found[ref] = (Path(event["source"]).relative_to(root).as_posix(), int(event["seq"]))
    return [found[ref] for ref in refs]


def ask(recall: rb.Recall, root: Path, query: Query, mode: str) -> tuple[int | None, str]:
    """The rank of the first target among the top five hits, and the mode that ran."""
    child = recall.must(
        "recall", "--query", query.text, "--mode", mode, "--top-n", str(TOP), "--json", "--kinds", "history"
    )
    answer = json.loads(child.out)
    places = where_hits_are(recall, root, [hit["ref"] for hit in answer["hits"]])
    rank = next((i for i, place in enumerate(places, 1) if place in query.targets), None)
    return rank, str(answer["mode"])


def measure(workdir: Path) -> tuple[list[Outcome], str]:
    """Every query in every mode, over a fresh index of the copied transcripts."""
    root = workdir / "transcripts"
    if not sb.peers_copy(root):
        raise FileNotFoundError(f"{NOT_FOUND} ({sb.PEERS})")
    queries = load_queries(root)
    recall = rb.Recall(workdir / "index.sqlite", root)
    semantic, why = rb.semantic_available(workdir)
    if semantic:
        recall.must("index", timeout=rb.INDEX_TIMEOUT_S)  # embeds every event: auto can be hybrid
        model = _model_note()
    else:
        recall.must("index", "--no-embed", timeout=rb.INDEX_TIMEOUT_S)
        model = f"no local embedding model ({why}): auto ranks by keyword"
    outcomes = []
    for query in queries:
        outcome = Outcome(query)
        for mode in MODES:
            outcome.ranks[mode], outcome.used[mode] = ask(recall, root, query, mode)
        outcomes.append(outcome)
    return outcomes, model


def _model_note() -> str:
    from korg_bridge.recall.semantic.model import resolve_model

    spec = resolve_model(os.environ)
    where = " (from `KORG_RECALL_MODEL_DIR`)" if os.environ.get("KORG_RECALL_MODEL_DIR") else ""
    return f"auto ran with the embedding model `{spec.model_id if spec else 'unknown'}`{where}, every event embedded"


def figures(outcomes: list[Outcome]) -> dict[str, dict[str, float | int]]:
    """hit@5 (count and share) and MRR@5 per mode."""
    out: dict[str, dict[str, float | int]] = {}
    for mode in MODES:
        ranks = [o.ranks[mode] for o in outcomes]
        hits = sum(1 for rank in ranks if rank is not None)
        out[mode] = {
            "hit5": hits,
            "queries": len(ranks),
            "mrr5": round(sum(1 / rank for rank in ranks if rank is not None) / len(ranks), 3),
        }
    return out


def _cell(rank: int | None) -> str:
    return "-" if rank is None else str(rank)


def render(outcomes: list[Outcome], model: str, where: common.Machine, args: list[str]) -> str:
    now = figures(outcomes)
    baseline = json.loads(BASELINE.read_text(encoding="utf-8")) if BASELINE.exists() else None
    rows = []
    for mode in MODES:
        used = sorted({o.used[mode] for o in outcomes})
        before = "-"
        if baseline is not None and mode in baseline["figures"]:
            old = baseline["figures"][mode]
            before = f"{old['hit5']}/{old['queries']} (MRR@5 {old['mrr5']:.3f})"
        rows.append(
            [
                f"`{mode}`" + (f" (ran as {', '.join(used)})" if used != [mode] else ""),
                before,
                f"**{now[mode]['hit5']}/{now[mode]['queries']}** (MRR@5 {now[mode]['mrr5']:.3f})",
            ]
        )
    summary = common.markdown_table(["mode", "before", "now: hit@5"], rows)
    per_query = common.markdown_table(
        ["query", *(f"{mode} rank" for mode in MODES)],
        [[f"`{o.query.id}`: {o.query.text}", *(_cell(o.ranks[m]) for m in MODES)] for o in outcomes],
    )
    intro = (
        "Whether `korg-recall` finds, in its top five, the event a developer means when asking about real "
        "past sessions: the Claude Code and Codex transcripts of `../shared/peers/transcripts`, with the 30 "
        "questions of `bench/golden/transcript_queries.json` (each names its target event by file and uuid, "
        "or file and line for Codex; written before any query ran). Every query is a fresh `korg-recall "
        "recall --json --top-n 5 --kinds history` process; `show` maps each hit back to its file and line. "
        f"{model[0].upper()}{model[1:]}."
    )
    notes = []
    if baseline is not None:
        notes.append(f"*Before*: {baseline['label']}.")
    for mode in MODES:
        missed = [o.query.id for o in outcomes if o.ranks[mode] is None]
        notes.append(f"Not in {mode}'s top five: {', '.join(f'`{m}`' for m in missed) or 'none'}.")
    notes.append("Rank of the first target per query (`-`: not in the top five):\n\n" + per_query)
    return common.section_body(
        "Recall on real transcripts (`bench/transcript_queries.py`)",
        intro,
        summary,
        where,
        common.rerun_command(__file__, args),
        "\n\n".join(notes),
    )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else None)
    parser.add_argument("--no-write", action="store_true", help="print only, leave docs/benchmarks.md alone")
    parser.add_argument(
        "--save-baseline",
        metavar="LABEL",
        help="keep these figures as the 'before' column (LABEL says which code, e.g. a commit)",
    )
    args = parser.parse_args(argv)
    started = time.perf_counter()
    where = common.machine()
    rb.compile_bytecode()
    with tempfile.TemporaryDirectory(prefix="transcript-queries-") as tmp:
        try:
            outcomes, model = measure(Path(tmp))
        except FileNotFoundError as exc:
            print(f"transcript_queries: {exc}; nothing measured.", file=sys.stderr)
            return 0
    now = figures(outcomes)
    for o in outcomes:
        print(f"{o.query.id:28} " + "  ".join(f"{m}={_cell(o.ranks[m]):>2}" for m in MODES))
    for mode in MODES:
        print(f"{mode}: hit@5 {now[mode]['hit5']}/{now[mode]['queries']}, MRR@5 {now[mode]['mrr5']:.3f}")
    if args.save_baseline:
        BASELINE.write_text(
            json.dumps({"label": args.save_baseline, "figures": now}, indent=1) + "\n", encoding="utf-8"
        )
    if not args.no_write:
        path = common.write_section(SECTION, render(outcomes, model, where, []))
        print(f"wrote the {SECTION} section of {path}", file=sys.stderr)
    print(f"{time.perf_counter() - started:.0f} s", file=sys.stderr)
    return 0


if __name__ == "__main__":
    os.environ.pop("KORG_RECALL_ALLOW_SECRETS", None)
    sys.exit(main())
