"""The Hydra app behind ``python -m sweep``: the task, its callbacks and its plugin registration.

``python -m sweep`` itself stays :mod:`sweep.__main__` (the command is its
name); it hands the command line to :mod:`sweep.cli.app`, whose callbacks
(:mod:`sweep.cli.callbacks`, named by ``conf/config.yaml``) run around the
jobs and whose plugins (:mod:`sweep.cli.plugins`) are registered first.
"""
