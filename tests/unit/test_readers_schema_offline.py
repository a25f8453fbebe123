"""The static schema without TensorFlow: importing and using it never loads TF, and
garbage is a decode error (parsed exactly as TensorFlow does: tests/test_readers_schema.py)."""
from __future__ import annotations

import subprocess
import sys

import pytest

from opregistry.model.readers import schema


def test_schema_does_not_import_tensorflow():
    code = ("import sys\nfrom opregistry.model.readers import schema\nschema.message_classes()\n"
            "print('tensorflow' in sys.modules)")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert done.stdout.strip() == "False"


def test_garbage_is_a_decode_error():
    from google.protobuf.message import DecodeError

    with pytest.raises(DecodeError):
        schema.parse("SavedModel", b"\xff\xff\xff\xff not a protobuf")
