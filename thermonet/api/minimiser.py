"""The contract of the ``thermonet.minimisers`` group."""

from __future__ import annotations

import abc
import dataclasses
import inspect
from dataclasses import dataclass
from typing import Any, ClassVar

from thermonet.api.settings import build_config
from thermonet.types import FloatArray


@dataclass(frozen=True)
class MinimiseResult:
    """Outcome of a minimisation.

    Attributes
    ----------
    theta : ndarray of float64, shape (n_params,)
        The lowest-energy point found.
    energy : float
        ``E(theta)``.
    max_abs_grad : float
        ``max_i |dE/dtheta_i|`` at ``theta``.
    n_steps : int
        Steps taken.
    n_grad_evals : int
        Gradient evaluations.
    reason : str
        Why it stopped: ``"gradient tolerance"``, ``"step budget"``, ``"step size underflow"``,
        ...
    converged : bool
        True if it stopped at the gradient tolerance.
    """

    theta: FloatArray
    energy: float
    max_abs_grad: float
    n_steps: int
    n_grad_evals: int
    reason: str
    converged: bool


class Minimiser(abc.ABC):
    """Base class of minimiser plugins (entry-point group ``thermonet.minimisers``).

    Subclasses define ``name``, a frozen dataclass ``Config`` of their settings (its field
    defaults are the defaults), and :meth:`minimise`.
    """

    name: ClassVar[str] = ""
    api_version: ClassVar[int] = 1
    Config: ClassVar[type]

    def __init__(self, config: Any = None, **settings: Any) -> None:
        if config is None:
            config = build_config(self.Config, settings, f"minimiser {self.name!r}")
        elif settings:
            config = dataclasses.replace(config, **settings)
        self.config = config

    @abc.abstractmethod
    def minimise(self, potential: Any, theta0: FloatArray, *, prior: Any = None
                 ) -> MinimiseResult:
        """Minimise ``potential`` from ``theta0``.

        ``prior`` (a :class:`~thermonet.priors.BoxPrior`) is used only by minimisers that
        respect the box.
        """


def accepts_callback(minimiser: Any) -> bool:
    """Whether ``minimiser.minimise`` takes the optional ``callback`` (progress) argument."""
    try:
        return "callback" in inspect.signature(minimiser.minimise).parameters
    except (TypeError, ValueError):
        return False
