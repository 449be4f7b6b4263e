"""Register the project's Hydra plugins explicitly.

Hydra finds plugins by walking the ``hydra_plugins`` namespace package's
``__path__``. A default editable install (``pip install -e .``) serves our
packages through an import hook that such a walk cannot list, so the sweeper
would only be found when running from the repo root. Importing the plugin
(which also registers its ConfigStore nodes) and registering the class makes
``hydra/sweeper=optuna`` work from any directory and any install mode.
"""

from __future__ import annotations


def register() -> None:
    from hydra.core.plugins import Plugins

    from hydra_plugins.specsweep_optuna_sweeper.optuna_sweeper import SpecsweepOptunaSweeper

    Plugins.instance().register(SpecsweepOptunaSweeper)
