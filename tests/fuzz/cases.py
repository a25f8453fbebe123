"""Fuzz inputs: input number N of a run with seed S is always the same file(s), made
from the seeds by a generator seeded with (S, N). A failure is replayed by its number
(``python -m tests.fuzz --replay N``); nothing is stored between runs. Mutators pick
from protobuf maps in sorted order (a map's own order differs from process to process)
and write maps in key order. The seeds are the same bytes on every run except the Keras
export, whose variable capture order TF chooses anew each time: its inputs are the same
mutations of a model whose captures may come in another order."""
from __future__ import annotations

import os
import random
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from opregistry.model.readers import schema
from tests.fuzz import metagraph, structure, text, validity, wire


@dataclass
class Case:
    index: int
    seed: str  # the seed model it was made from
    labels: list[str] = field(default_factory=list)  # the mutations applied
    files: dict[str, bytes] = field(default_factory=dict)  # relative path -> content
    target: str = ""  # the path given to check, relative to the case's directory
    # relative path -> apparent size: the file is extended with holes (a sparse file)
    holes: dict[str, int] = field(default_factory=dict)

    @property
    def size(self) -> int:
        return sum(len(v) for v in self.files.values())

    def write(self, root: Path) -> Path:
        for name, data in self.files.items():
            path = root / name
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_bytes(data)
            if name in self.holes:
                os.truncate(path, self.holes[name])
        return root / self.target


def kind_of(path: Path) -> str:
    if path.suffix == ".pbtxt":
        return "pbtxt"
    return "savedmodel" if path.name == "saved_model.pb" else "graphdef"


class Generator:
    """Makes case N from the seeds (name -> file) for run seed ``seed``."""

    def __init__(self, seeds: dict[str, Path], seed: int = 0):
        self.seed = seed
        self.names = sorted(seeds)
        self.data = {name: seeds[name].read_bytes() for name in self.names}
        self.kinds = {name: kind_of(seeds[name]) for name in self.names}

    def case(self, index: int) -> Case:
        rng = random.Random(f"{self.seed}:{index}")
        name = rng.choice(self.names)
        case = Case(index, name)
        kind, data = self.kinds[name], self.data[name]
        roll = rng.random()
        if kind == "pbtxt":
            data = self._text(data, rng, case.labels)
        elif roll < 0.35:
            data, case.labels[:] = wire.mutate(data, rng)
        else:
            data = self._structured(kind, data, rng, case.labels)
        self._place(case, kind, data, rng)
        return case

    def _structured(self, kind: str, data: bytes, rng: random.Random, labels: list[str]
                    ) -> bytes:
        message = schema.parse("SavedModel" if kind == "savedmodel" else "GraphDef", data)
        mutators: list[Any] = structure.GRAPH_MUTATORS + [validity.m_validity] + (
            metagraph.META_MUTATORS if kind == "savedmodel" else [])
        for _ in range(rng.choice((1, 1, 2, 3))):
            labels.append(rng.choice(mutators)(message, rng))
        data = message.SerializeToString(deterministic=True)
        if rng.random() < 0.15:  # then bytes as well: a broken file of a broken model
            data, more = wire.mutate(data, rng)
            labels.extend(more)
        return data

    def _text(self, data: bytes, rng: random.Random, labels: list[str]) -> bytes:
        if rng.random() < 0.5:
            data, labels[:] = text.mutate(data.decode("utf-8"), rng)
            return data
        from google.protobuf import text_format

        message = schema.message_classes()["GraphDef"]()
        text_format.Parse(data.decode("utf-8"), message, allow_unknown_field=True)
        for _ in range(rng.choice((1, 1, 2))):
            labels.append(rng.choice(structure.GRAPH_MUTATORS + [validity.m_validity])(
                message, rng))
        data = text_format.MessageToString(message).encode("utf-8")
        if rng.random() < 0.2:
            data, more = text.mutate(data.decode("utf-8"), rng)
            labels.extend(more)
        return data

    def _place(self, case: Case, kind: str, data: bytes, rng: random.Random) -> None:
        """Where the bytes go: as the seed was, and sometimes under another name (a
        SavedModel's file as a GraphDef, binary as text, the saved_model.pb itself)."""
        roll = rng.random()
        if roll < 0.05:
            kind = rng.choice(("savedmodel", "graphdef", "pbtxt"))
            case.labels.append(f"as {kind}")
        if kind == "savedmodel":
            name = "m/saved_model.pb"
            case.target = "m/saved_model.pb" if rng.random() < 0.1 else "m"
        else:
            name = case.target = "m.pbtxt" if kind == "pbtxt" else "m.pb"
        case.files[name] = data
        if rng.random() < 0.005:  # holes after the data, to 2 GiB - 1 (issue 21)
            case.holes[name] = 2 ** 31 - 1
            case.labels.append("sparse")
