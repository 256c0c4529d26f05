"""The scorers, each a small class (base.Scorer); importing this package registers them all."""

from evals_app.scorers import judge, pairwise, reference  # noqa: F401  (registers them)
from evals_app.scorers.base import (
    REGISTRY,
    Case,
    Scorer,
    SpecError,
    Verdict,
    build,
    spec_key,
)

__all__ = ["REGISTRY", "Case", "Scorer", "SpecError", "Verdict", "build", "spec_key"]
