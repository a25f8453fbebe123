"""Rows and the summary line of a check result."""
from __future__ import annotations

from typing import Any

from opregistry.formats import plural
from opregistry.text import printable

COLUMNS = ["signature", "output", "target_kind", "target", "status", "node", "op", "function",
           "reason"]  # + "library" when an op of an op library blocks


def finding_rows(result: Any) -> list[dict[str, Any]]:
    """One row per (finding or partial path, op): blocked pairs first, each pair's ops
    in order; a blocked pair with no op to name gets one row saying so."""
    rows = []
    for status, items in (("blocked", result.findings), ("partial_path", result.partial_paths)):
        for item in items:
            ops = item.blocking_ops if status == "blocked" else item.ops
            base = {"meta_graph": item.meta_graph, "signature": item.signature,
                    "output": item.output, "target_kind": item.target_kind,
                    "target": item.target, "status": status}
            for b in ops or [None]:
                rows.append(dict(base, node=b.node if b else None, op=b.op if b else None,
                                 function=b.function if b else None,
                                 reason=b.reason if b else "no path",
                                 library=b.library if b else None))
    return rows


def summary_line(result: Any) -> str:
    """What ``check`` prints on stderr after the rows."""
    targets = {(f.meta_graph, f.signature, f.output, f.target) for f in result.findings}
    summary = (f"{plural(len(targets), 'blocked target')}"
               + (f", {plural(len(result.partial_paths), 'partial path')}"
                  if result.partial_paths else "") + " in "
               f"{plural(len(result.outputs), 'output')}"
               + (f" of {plural(len(result.meta_graphs), 'MetaGraph')}"
                  if len(result.meta_graphs) > 1 else "")
               + f" against TensorFlow {result.release}")
    if result.library_ops:
        by_library: dict[str, list[str]] = {}
        for op, library in result.library_ops.items():
            by_library.setdefault(library, []).append(op)
        summary += "; ops of op libraries: " + "; ".join(
            f"{', '.join(ops)} ({library})" for library, ops in sorted(by_library.items()))
    if result.unknown_ops:
        summary += "; ops unknown to the database: " + ", ".join(
            printable(op) for op in result.unknown_ops)
    return summary


def serving_version_line(base: str, newest: Any) -> str:
    """What ``check`` says on stderr when it reads the newest version of a TF Serving
    model base path (folder names are the file system's: shown quoted)."""
    from opregistry.model.readers.model import shown

    line = (f"{base}: a model base path with {plural(newest.versions, 'version')}; "
            f"checking the newest, {shown(newest.path.name)} (version {newest.version})")
    if newest.ignored:
        names = ", ".join(shown(name) for name in newest.ignored[:5])
        more = f" and {len(newest.ignored) - 5} more" if len(newest.ignored) > 5 else ""
        line += f"; ignored {plural(len(newest.ignored), 'folder')} not named by a " \
                f"number: {names}{more}"
    return line
