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
    """Register the sweeper unless Hydra's own scan found it (``--info plugins`` lists it once)."""
    from hydra.core.plugins import Plugins
    from hydra.plugins.sweeper import Sweeper

    from hydra_plugins.specsweep_optuna_sweeper.optuna_sweeper import SpecsweepOptunaSweeper

    plugins = Plugins.instance()
    # The scan loads plugin modules itself: the class it found is another object of the same name.
    name = (SpecsweepOptunaSweeper.__module__, SpecsweepOptunaSweeper.__qualname__)
    if all((c.__module__, c.__qualname__) != name for c in plugins.discover(Sweeper)):
        plugins.register(SpecsweepOptunaSweeper)
