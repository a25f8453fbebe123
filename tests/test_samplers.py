"""``check`` on models whose gradient comes from a sampler's own gradient (implicit
reparameterisation, tests/samplers.py), pair by pair against TensorFlow's gradients of
the loaded SavedModels (tests/differential.py), saved both ways.

Marked ``slow`` (CI runs it; the developer tier leaves it out): every sampler saved both ways and answered by TF: a minute of a worker."""
from __future__ import annotations

import pytest

from opregistry import check

pytestmark = pytest.mark.slow

pytest.importorskip("tensorflow")
pytest.importorskip("tensorflow_probability")
import differential  # noqa: E402  (tests/ is on sys.path)
import samplers  # noqa: E402


@pytest.fixture(scope="module")
def sampler_models(tmp_path_factory):
    return samplers.build(tmp_path_factory.mktemp("samplers"))


def test_check_agrees_with_tensorflow_on_every_sampler_pair(sampler_models, harvested_db):
    comparisons = differential.run(sampler_models, db=harvested_db)
    print(differential.report(comparisons))
    assert [d for c in comparisons for d in c.disagreements] == []
    assert {c.model for c in comparisons} == {
        f"{name}-{how}" for name in ("stateless_gamma", "random_gamma", "tfp_gamma",
                                     "tfp_beta", "tfp_dirichlet", "tfp_student_t")
        for how in ("saved", "export")}
    # both answers, in every model: the sampler's variable gets its gradient through the
    # sampler (TFP: a saved custom gradient whose None outputs TF leaves out) ...
    for entry in sampler_models:
        result = check(str(entry.path), db=harvested_db)
        sampled = [o for o in result.outputs if o.output == "sample"]
        assert sampled and all(o.blocked == [] and len(o.with_gradient) >= 2
                               for o in sampled), entry.name
    # ... and Round still blocks, unrelated stays unrelated
    assert all(c.with_gradient and c.without for c in comparisons)
