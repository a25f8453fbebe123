"""What a harvest installs: TF recipes, tf-nightly, op libraries beside them, and how a
--plugin value is read (a package to install, or a module or file to import)."""
from __future__ import annotations

import pytest

from opregistry.errors import OpregistryError
from opregistry.harvest.recipes import (
    LIBRARIES,
    NIGHTLY,
    is_requirement,
    library_for,
    recipe_for,
    requirement_name,
    shipped_library_requirement,
)
from opregistry.harvest.runner import HarvestTarget


def test_a_library_that_needs_the_tensorflow_package_gets_it():
    plain = recipe_for("2.21")
    assert (plain.package, plain.version, plain.libraries) == ("tensorflow-cpu", "2.21.0", ())
    text = recipe_for("2.21", libraries=("tensorflow-text==2.21.1",))
    assert text.package == "tensorflow"  # not tensorflow-cpu plus a second TF beside it
    assert text.requirements == ["tensorflow==2.21.0", "tensorflow-text==2.21.1"]
    assert text.name != plain.name and "tensorflow-text" in text.name  # a venv of its own
    forests = recipe_for("2.19.0", libraries=("tensorflow-decision-forests==1.12.0",))
    assert forests.version == "2.19.0" and "ydf==0.15.0" in forests.requirements
    io = recipe_for("2.16.2", libraries=("tensorflow-io==0.37.1",))
    assert io.package == "tensorflow-cpu" and \
        "tensorflow-io-gcs-filesystem==0.37.1" in io.requirements
    explicit = recipe_for("2.21", "tensorflow-cpu", ("tensorflow-text==2.21.1",))
    assert explicit.package == "tensorflow-cpu"  # the user's --package wins


def test_nightly_recipes():
    assert recipe_for("nightly").version == NIGHTLY.version
    assert recipe_for("nightly").package == "tf-nightly"
    exact = recipe_for("2.24.0.dev20270101")
    assert (exact.version, exact.python) == ("2.24.0.dev20270101", NIGHTLY.python)


def test_plugin_values_are_read_as_requirements_or_modules():
    assert is_requirement("tensorflow-text==2.21.1") and is_requirement("tensorflow-text")
    assert is_requirement("deepmd-kit[cpu]==3.2.0")
    assert not is_requirement("tensorflow_text") and not is_requirement("my_grads.py")
    assert not is_requirement("deepmd.tf") and not is_requirement("./ops/x.py")
    assert requirement_name("Tensorflow_Text==2.21.1") == "tensorflow-text"
    assert requirement_name("deepmd-kit[cpu]==3.2.0") == "deepmd-kit"
    assert library_for("deepmd-kit[cpu]==3.2.0").modules == ("deepmd.tf",)
    assert library_for("my-ops==1.0").modules == ("my_ops",)
    with pytest.raises(OpregistryError, match="not a package requirement"):
        requirement_name("==2.21.1")


def test_targets_install_requirements_only_with_an_environment():
    target = HarvestTarget(tf_version="2.21", plugins=("tensorflow-text==2.21.1",))
    assert target.requirements() == ("tensorflow-text==2.21.1",)
    assert target.libraries().plugins == ("tensorflow_text",)
    by_module = HarvestTarget(tf_version="2.21", plugins=("tensorflow_text",))
    assert by_module.requirements() == ("tensorflow-text",)
    local = HarvestTarget(plugins=("tensorflow_text", "grads.py"), op_libraries=("x.so",),
                          imports=("tensorflow_text.extra",))
    assert local.requirements() == ()
    assert local.libraries().plugins == ("tensorflow_text", "grads.py", "tensorflow_text.extra")
    with pytest.raises(OpregistryError, match="--tf-version"):
        HarvestTarget(plugins=("tensorflow-text==2.21.1",)).requirements()


def test_every_shipped_library_has_a_measured_recipe():
    for library in LIBRARIES.values():
        recipe = recipe_for(library.tf_version, libraries=(shipped_library_requirement(library),))
        assert recipe.version == library.tf_version
        assert f"=={library.version}" in recipe.requirements[-1]
