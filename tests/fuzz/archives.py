"""Fuzz inputs for the Keras reader: `.keras` archives and `.h5` files mutated from a
seed written by Keras, each checked through the command line's main() in one process
that imported TensorFlow once (TensorFlow cannot be forked safely; a hang or crash
ends the run and names its input). Input N of run seed S is always the same file.

    python -m tests.fuzz.archives --inputs 120 [--seed 0]

Mutations: members named outside the archive (zip-slip), config.json replaced by
hostile JSON (a Lambda layer carrying Python bytecode, a layer whose module names
`os`/`builtins`, deep nesting, huge sizes, garbage, truncation), members removed,
duplicated or truncated, bytes flipped in the archive or the HDF5 file, and the HDF5
file's `model_config` attribute replaced by the same JSON. Every code-execution
attempt would create the run's canary file: it must never appear.
"""
from __future__ import annotations

import argparse
import base64
import io
import json
import marshal
import os
import random
import sys
import time
import zipfile
from pathlib import Path
from typing import Any

SEEDS = {"keras": "seed.keras", "h5": "seed.h5"}


def build_seeds(root: Path) -> dict[str, Path]:
    """A small functional model saved both ways (Keras imported here)."""
    import keras

    root.mkdir(parents=True, exist_ok=True)
    inputs = keras.Input((3,), name="x")
    hidden = keras.layers.Dense(4, activation="relu", name="dense")(inputs)
    model = keras.Model(inputs, keras.layers.Dense(1, name="head")(hidden))
    for kind, name in SEEDS.items():
        model.save(root / name)
    return {kind: root / name for kind, name in SEEDS.items()}


def _payload(canary: Path) -> str:
    return f"open({str(canary)!r}, 'w').write('ran')"


def hostile_configs(config: dict[str, Any], canary: Path, rng: random.Random
                    ) -> tuple[bytes, str]:
    """config.json (or an HDF5 model_config) made hostile; the bytes and a label."""
    roll = rng.randrange(7)
    layers = config.get("config", {}).get("layers", [])
    if roll == 0 and layers:  # a Lambda layer whose function is bytecode (safe_mode)
        code = compile(_payload(canary), "<fuzz>", "exec")
        layer = rng.choice(layers)
        layer.update(class_name="Lambda", module="keras.layers")
        layer["config"] = {"name": layer.get("config", {}).get("name", "l"),
                           "function": {"class_name": "__lambda__", "config": {
                               "code": base64.b64encode(marshal.dumps(code)).decode(),
                               "defaults": None, "closure": None}}}
        return json.dumps(config).encode(), "lambda bytecode"
    if roll == 1 and layers:  # a "layer" that names a function that runs code
        layer = rng.choice(layers)
        layer.update(module=rng.choice(("os", "builtins", "subprocess")),
                     class_name=rng.choice(("system", "eval", "exec", "getoutput")))
        layer["config"] = {"command": f"touch {canary}", "source": _payload(canary)}
        return json.dumps(config).encode(), "module names code"
    if roll == 2:
        depth = rng.choice((100, 10_000, 100_000))
        return ("[" * depth + "]" * depth).encode(), f"nested {depth}"
    if roll == 3 and layers:
        layer = rng.choice(layers)
        layer.setdefault("config", {})["units"] = rng.choice((10 ** 12, -1, 2 ** 63, "x"))
        return json.dumps(config).encode(), "huge size"
    if roll == 4:
        data = json.dumps(config).encode()
        return data[:rng.randrange(len(data))], "truncated json"
    if roll == 5:
        return bytes(rng.randrange(256) for _ in range(rng.choice((0, 16, 4096)))), "garbage"
    return json.dumps(rng.choice(([], 5, None, {"class_name": "Functional"}))).encode(), \
        "wrong type"


def _flip(data: bytes, rng: random.Random) -> tuple[bytes, str]:
    out = bytearray(data)
    if rng.random() < 0.3:
        return bytes(out[:rng.randrange(len(out))]), "truncated"
    for _ in range(rng.choice((1, 4, 32))):
        out[rng.randrange(len(out))] ^= 1 << rng.randrange(8)
    return bytes(out), "bits flipped"


def mutate_keras(seed: bytes, canary: Path, rng: random.Random) -> tuple[bytes, list[str]]:
    with zipfile.ZipFile(io.BytesIO(seed)) as archive:
        members = {info.filename: archive.read(info) for info in archive.infolist()}
    labels = []
    roll = rng.randrange(5)
    if roll == 0:
        name = rng.choice(("../../", "/tmp/", "C:/", "..\\", "assets/../../")) + canary.name
        members[name] = b"slip"
        labels.append("zip-slip")
    elif roll == 1:
        members["config.json"], label = hostile_configs(
            json.loads(members["config.json"]), canary, rng)
        labels.append(label)
    elif roll == 2:
        name = rng.choice(sorted(members))
        if rng.random() < 0.5:
            del members[name]
            labels.append(f"no {name}")
        else:
            members[name], label = _flip(members[name], rng)
            labels.append(f"{name} {label}")
    out = io.BytesIO()
    with zipfile.ZipFile(out, "w") as archive:
        for name, data in members.items():
            archive.writestr(name, data)
        if roll == 3:
            archive.writestr("config.json", b"{}")  # a duplicate name: the last one wins?
            labels.append("duplicate member")
    data = out.getvalue()
    if roll == 4:
        data, label = _flip(data, rng)
        labels.append(f"archive {label}")
    return data, labels


def mutate_h5(seed: Path, target: Path, canary: Path, rng: random.Random) -> list[str]:
    if rng.random() < 0.4:
        data, label = _flip(seed.read_bytes(), rng)
        target.write_bytes(data)
        return [label]
    import h5py

    target.write_bytes(seed.read_bytes())
    with h5py.File(target, "r+") as file:
        config = json.loads(file.attrs["model_config"])
        data, label = hostile_configs(config, canary, rng)
        file.attrs["model_config"] = data.replace(b"\x00", b" ")  # (HDF5 strings: no NUL)
    return [f"model_config {label}"]


def write_case(seeds: dict[str, Path], index: int, run_seed: int, root: Path, canary: Path
               ) -> tuple[Path, list[str]]:
    rng = random.Random(f"archive:{run_seed}:{index}")
    kind = rng.choice(sorted(seeds))
    root.mkdir(parents=True, exist_ok=True)
    target = root / f"m{index}.{kind}"
    if kind == "keras":
        data, labels = mutate_keras(seeds[kind].read_bytes(), canary, rng)
        target.write_bytes(data)
    else:
        labels = mutate_h5(seeds[kind], target, canary, rng)
    return target, [kind] + labels


def _peak_kb() -> int:
    with open("/proc/self/status") as status:
        return next(int(line.split()[1]) for line in status if line.startswith("VmHWM:"))


def _reset_peak() -> None:
    with open("/proc/self/clear_refs", "w") as refs:  # 5: the peak RSS starts again
        refs.write("5")


def check_through_main(target: Path, stderr_file: Path) -> tuple[int, str]:
    """`opregistry check TARGET` by the command line's main(), in this process: its
    exit code and everything written to fd 2 (TensorFlow's own C++ lines included)."""
    from opregistry.cli import main

    sys.stdout.flush()
    sys.stderr.flush()
    saved_out, saved_err = os.dup(1), os.dup(2)
    err = os.open(stderr_file, os.O_WRONLY | os.O_CREAT | os.O_TRUNC)
    null = os.open(os.devnull, os.O_WRONLY)
    os.dup2(null, 1)
    os.dup2(err, 2)
    sys.argv = ["opregistry", "check", str(target), "--tf", "2.21"]
    code: Any = 0
    try:
        main()
    except SystemExit as exc:
        code = exc.code if isinstance(exc.code, int) else 1
    except BaseException:  # noqa: B036 - a traceback is what the run looks for
        import traceback

        traceback.print_exc()
        code = 1
    finally:
        sys.stdout.flush()
        sys.stderr.flush()
        os.dup2(saved_out, 1)
        os.dup2(saved_err, 2)
        for fd in (saved_out, saved_err, err, null):
            os.close(fd)
    return code, stderr_file.read_text(errors="replace")


def run(inputs: int, run_seed: int, root: Path) -> list[dict[str, Any]]:
    """Inputs 0..inputs-1, each checked here; one dict per input."""
    from tests.fuzz.server import _cli_outcome

    seeds = build_seeds(root / "seeds")
    canary = root / "canary"
    check_through_main(seeds["keras"], root / "warm.txt")  # TensorFlow and Keras loaded
    outcomes = []
    for index in range(inputs):
        target, labels = write_case(seeds, index, run_seed, root / "cases", canary)
        _reset_peak()
        before = _peak_kb()
        started = time.monotonic()
        code, stderr = check_through_main(target, root / "stderr.txt")
        outcome, detail = _cli_outcome(code, stderr)
        if canary.exists():
            outcome, detail = "failure", f"code ran: {canary.read_text()!r}"
        outcomes.append(dict(index=index, labels=labels, size=target.stat().st_size,
                             outcome=outcome, detail=detail[-500:],
                             seconds=time.monotonic() - started,
                             growth_kb=_peak_kb() - before))
    return outcomes


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tests.fuzz.archives")
    parser.add_argument("--inputs", type=int, default=120)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--work", type=Path, required=True)
    parser.add_argument("--json", action="store_true", help="one JSON list on stdout")
    args = parser.parse_args(argv)
    outcomes = run(args.inputs, args.seed, args.work)
    if args.json:
        print(json.dumps(outcomes))
        return 0
    classes: dict[str, int] = {}
    for o in outcomes:
        classes[o["outcome"]] = classes.get(o["outcome"], 0) + 1
    worst = max(outcomes, key=lambda o: o["growth_kb"])
    print(f"{len(outcomes)} archives: " + ", ".join(f"{k} {v}" for k, v in sorted(
        classes.items())) + f"; largest peak RSS growth {worst['growth_kb'] / 1024:.1f} MB "
          f"(input {worst['index']})" + ("" if any(
              o["detail"].startswith("code ran") for o in outcomes) else "; no code ran"))
    for o in outcomes:
        if o["outcome"] == "failure":
            print(f"FAILURE input {o['index']} ({', '.join(o['labels'])}): {o['detail']}")
    return 1 if "failure" in classes else 0


if __name__ == "__main__":
    sys.exit(main())
