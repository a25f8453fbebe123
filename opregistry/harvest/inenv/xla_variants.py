"""XLA verdicts per attribute value (issue 37): the ops whose XLA kernel accepts some
values of an attribute and refuses others, each value compiled.

In-environment code (see ``__init__.py``): standard library and TensorFlow only,
Python 3.7+, TF 1.13+.

The attributes are those TF's tf2xla kernels test before compiling (read from
``tensorflow/compiler/tf2xla/kernels``): ``TridiagonalSolve`` refuses
``partial_pivoting=True`` ("Pivoting is not yet supported"), the resize kernels and their
gradients take some ``align_corners`` / ``half_pixel_centers`` settings and not others
(``ResizeBilinearGrad with align_corners=False or half_pixel_centers=True is not yet
implemented`` before 2.15). Each is an attribute that leaves the op's shapes as they are,
so the op is built as the probe builds it, the attributes are set on the built op (its
gradient function reads them from there) and the op and its gradient are compiled again.
Attributes that change shapes (data formats) or types are not varied here.
"""
from __future__ import print_function

# op type -> the attributes varied, each with the values tried (every combination)
_RESIZE = (("align_corners", (False, True)), ("half_pixel_centers", (False, True)))
VARIANTS = {
    "TridiagonalSolve": (("partial_pivoting", (False, True)),
                         ("perturb_singular", (False, True))),
    "ResizeBilinear": _RESIZE,
    "ResizeBilinearGrad": _RESIZE,
    "ResizeNearestNeighbor": _RESIZE,
    "ResizeNearestNeighborGrad": _RESIZE,
    "ResizeBicubic": _RESIZE,
    "ResizeBicubicGrad": _RESIZE,
}
# what a variant's record keeps of probe_xla's (the rest is the op's own record's)
_KEPT = ("forward", "gradient", "kernels")


def combinations(op_def):
    """[{attr: value}] for ``op_def``: every combination of the attributes this release's
    OpDef has (``half_pixel_centers`` came in 1.14, ``perturb_singular`` in 2.6)."""
    names = set(a.name for a in op_def.attr)
    varied = [(name, values) for name, values in VARIANTS.get(op_def.name, ())
              if name in names]
    found = [{}]
    for name, values in varied:
        found = [dict(c, **{name: v}) for c in found for v in values]
    return found if varied else []


def set_attrs(op, attrs):
    """Set ``attrs`` (booleans) on a built op, as its gradient function will read them."""
    from tensorflow.core.framework import attr_value_pb2
    for name, value in sorted(attrs.items()):
        op._set_attr(name, attr_value_pb2.AttrValue(b=bool(value)))  # noqa: SLF001


def variants(probe_xla, build, op_def):
    """The ``variants`` of an op's ``xla`` record: [{attrs, forward, gradient, kernels}],
    one per combination, each compiled by ``probe_xla(build)`` with the attributes set
    on the op ``build()`` returns. Empty for an op whose XLA kernel no attribute changes."""
    found = []
    for attrs in combinations(op_def):
        def with_attrs(attrs=attrs):
            built = build()
            set_attrs(built[1], attrs)
            return built
        record = probe_xla(with_attrs)
        entry = {"attrs": attrs}
        entry.update((k, record[k]) for k in _KEPT if k in record)
        found.append(entry)
    return found
