"""`.keras` and `.h5` inflation bombs are refused before Keras is given them: a member,
the members together, an HDF5 dataset or one of its chunks past its limit is one
`Error:` line naming it, exit 2, for `check` and `gradcheck` alike, within the memory
bound (docs/bad-input.md): each command runs in a child process whose peak RSS
(``resource.getrusage(RUSAGE_CHILDREN).ru_maxrss``) is measured. Before, a 1.5 MB
archive whose config.json inflates to 1.5 GiB peaked at 3.7 GB with exit 0."""
from __future__ import annotations

import json
import os
import subprocess
import sys
import zipfile
import zlib
from pathlib import Path

import pytest

GIB = 1 << 30
# the child's peak RSS: TensorFlow and Keras imported (~600-800 MB) plus the limit's
# worth; the bombs inflate to 1 GiB and more, so their peak without the caps is past it
PEAK_LIMIT_MB = 1200


@pytest.fixture(scope="module")
def seed(tmp_path_factory: pytest.TempPathFactory) -> Path:
    import keras

    path = tmp_path_factory.mktemp("bombs") / "seed.keras"
    keras.Sequential([keras.Input((3,)), keras.layers.Dense(2)]).save(path)
    return path


def _deflated(name: str) -> zipfile.ZipInfo:
    info = zipfile.ZipInfo(name)
    info.compress_type = zipfile.ZIP_DEFLATED
    return info


class _Repeating:
    """A raw deflate compressor that compresses a piece written again and again once:
    after a full flush each copy is the same bytes (a 1 GiB bomb in a second, where
    compressing it costs a minute on a busy machine)."""

    def __init__(self) -> None:
        self._deflate = zlib.compressobj(9, zlib.DEFLATED, -15)
        self._last: tuple[bytes, bytes] | None = None

    def compress(self, data: bytes) -> bytes:
        if self._last is None or self._last[0] is not data:
            self._last = (data, self._deflate.compress(data) +
                          self._deflate.flush(zlib.Z_FULL_FLUSH))
        return self._last[1]

    def flush(self) -> bytes:
        return self._deflate.flush()


def _bomb_member(archive: zipfile.ZipFile, name: str, head: bytes, piece: bytes,
                 size: int, tail: bytes) -> None:
    """A member of ``head``, ``piece`` repeated to ``size`` bytes, ``tail``: deflated
    ~1,000:1 (zipfile writes its header, CRC and sizes)."""
    with archive.open(_deflated(name), "w", force_zip64=True) as member:
        member._compressor = _Repeating()  # type: ignore[attr-defined]  # noqa: SLF001
        member.write(head)
        for _ in range(size // len(piece)):
            member.write(piece)
        member.write(tail)


def _zeros(archive: zipfile.ZipFile, name: str, size: int) -> None:
    _bomb_member(archive, name, b"", bytes(1 << 24), size, b"")


def _rewritten(seed: Path, target: Path, replace: str, size: int) -> Path:
    with zipfile.ZipFile(seed) as src, \
            zipfile.ZipFile(target, "w", compression=zipfile.ZIP_DEFLATED) as dst:
        for info in src.infolist():
            if info.filename == replace:
                if replace.endswith(".json"):  # the real config padded: {..., "pad": "0..0"}
                    real = src.read(info).rstrip()
                    assert real.endswith(b"}")
                    _bomb_member(dst, replace, real[:-1] + b', "pad": "', b"0" * (1 << 24),
                                 size, b'"}')
                else:
                    _zeros(dst, replace, size)
            else:
                dst.writestr(info.filename, src.read(info))
    return target


def _h5_bomb(seed: Path, target: Path) -> Path:
    """The seed's model as .h5 with one weight replaced by a 1 GiB gzip dataset of
    zeros (chunked: a few KB on disk)."""
    import h5py
    import keras

    model = keras.models.load_model(seed)
    model.save(target)
    with h5py.File(target, "a") as file:
        found = []
        file.visititems(lambda name, obj: found.append(name)
                        if isinstance(obj, h5py.Dataset) else None)
        name = found[0]
        del file[name]
        file.create_dataset(name, shape=(GIB // 4,), dtype="float32", chunks=(1 << 20,),
                            compression="gzip", fillvalue=0.0)
    return target


def _run(command: str, path: Path, cwd: Path) -> tuple[subprocess.CompletedProcess[str], int]:
    """The command in a child; (its result, the child's peak RSS in MB)."""
    code = ("import resource, subprocess, sys; "
            "done = subprocess.run(sys.argv[1:], capture_output=True, text=True); "
            "sys.stdout.write(done.stdout); sys.stderr.write(done.stderr); "
            "print(resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss, file=sys.stderr); "
            "sys.exit(done.returncode)")
    env = {k: v for k, v in os.environ.items() if k != "OPREGISTRY_DB"}
    done = subprocess.run([sys.executable, "-c", code, sys.executable, "-m", "opregistry",
                           command, str(path), "--tf", "2.21"], capture_output=True,
                          text=True, env=env, timeout=900, cwd=cwd)
    *lines, peak = done.stderr.splitlines()
    done.stderr = "".join(f"{line}\n" for line in lines)
    return done, int(peak) // 1024


@pytest.mark.parametrize(("kind", "member"), [
    ("config", "config.json"), ("weights", "model.weights.h5"), ("h5", "/")])
def test_a_bomb_is_one_line_and_bounded_in_check_and_gradcheck(seed, tmp_path, kind, member):
    if kind == "config":
        path = _rewritten(seed, tmp_path / "config.keras", "config.json", 3 * GIB // 2)
    elif kind == "weights":
        path = _rewritten(seed, tmp_path / "weights.keras", "model.weights.h5", GIB)
    else:
        path = _h5_bomb(seed, tmp_path / "bomb.h5")
    assert path.stat().st_size < 2 * (1 << 20)
    # (gradcheck reads a Keras file by the same function: once, for the weights)
    for command in ("check", "gradcheck") if kind == "weights" else ("check",):
        done, peak = _run(command, path, tmp_path)
        assert done.returncode == 2, (command, done.stderr)
        assert done.stderr.startswith("Error:") and done.stderr.count("\n") == 1, done.stderr
        if kind == "h5":
            assert "HDF5 dataset" in done.stderr, done.stderr
        else:
            assert f"archive member '{member}' inflates to more than" in done.stderr
        print(f"{kind} {command}: peak RSS {peak} MB")
        assert peak < PEAK_LIMIT_MB, (command, peak)
    assert sorted(p.name for p in tmp_path.iterdir()) == [path.name]  # nothing extracted


def test_a_chunk_that_inflates_past_its_size_is_refused(seed, tmp_path):
    """A chunk whose compressed bytes inflate to far more than the chunk (HDF5's deflate
    filter grows its buffer to fit): refused by reading it in pieces."""
    import zlib

    import h5py

    from opregistry.model.graph import ModelError
    from opregistry.model.readers.archives import check_hdf5

    path = tmp_path / "chunk.h5"
    with h5py.File(path, "w") as file:
        data = file.create_dataset("w", shape=(1024,), dtype="uint8", chunks=(1024,),
                                   compression="gzip")
        data.id.write_direct_chunk((0,), zlib.compress(bytes(64 << 20)), 0)
    with pytest.raises(ModelError, match="chunk that inflates to more than its 1,024 bytes"):
        check_hdf5(str(path), str(path), 1 << 30)


def test_real_archives_and_a_recompressed_one_are_still_read(seed, tmp_path):
    from opregistry import check

    recompressed = tmp_path / "deflated.keras"
    with zipfile.ZipFile(seed) as src, \
            zipfile.ZipFile(recompressed, "w", compression=zipfile.ZIP_DEFLATED) as dst:
        for info in src.infolist():
            dst.writestr(info.filename, src.read(info))
    for path in (seed, recompressed):
        (report,) = check(path, release="2.21").outputs
        assert report.with_gradient
    config = json.loads(zipfile.ZipFile(seed).read("config.json"))
    assert config["class_name"] == "Sequential"
