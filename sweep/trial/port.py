"""Which port a local server listens on: the configured one, or the next free one.

``server.port`` has a default per server group (30123 for the simulator,
30000 for SGLang, ...). On a box where something else already listens there,
every trial of a grid used to fail ``port_in_use``. Now, unless the user gave
``server.port`` (an override, or a ``launcher.hosts`` entry's ``server_port``),
the launcher picks the port (:meth:`launchers.base.ServerLauncher.pick_port`:
the local launcher takes its running server's port, a kept server's, else the
first free one from the configured port up; remote launchers keep the
configured port) and the trial is rendered for it. A port taken by someone else
between that pick and the server's bind (a real server binds only after
loading its weights) is tried again on the next free port, twice at most
(:func:`sweep.trial.run.run_trial`).

A port chosen this way is not part of what the server *is*: the launch keeps
the fingerprint it has on the configured port (``Launch.identity``). So the
next job of a grid, which the launcher gives the same port, reuses the server
when nothing else changed, a rerun grid resumes on whatever port is free then,
and reports compare the same configuration across ports. A port the user set
stays part of the fingerprint, as before.
"""

from __future__ import annotations

import copy
import dataclasses
from dataclasses import dataclass
from typing import Any, Sequence

from sweep.compose.config import TrialConfig
from sweep.launch import Launch

PORT_KEY = "server.port"


def explicit(overrides: Sequence[str]) -> bool:
    """Whether the overrides set ``server.port`` (``server.port=``, ``+server.port=``, ``++...``)."""
    return any(o.lstrip("+~").partition("=")[0].strip() == PORT_KEY for o in overrides)


@dataclass(frozen=True)
class Ports:
    """How to render the trial on another port (only for a port the user did not set)."""

    node: Any                 # the composed, unresolved config the trial was built from
    configured: TrialConfig   # the trial on its configured port
    identity: str             # the launch's fingerprint there

    def at(self, port: int) -> tuple[TrialConfig, Launch]:
        """The trial and its launch on ``port``: built again from the composed config, so every
        flag that names the port follows it (the YAML says which; no flag is spelt here)."""
        from omegaconf import OmegaConf, open_dict

        from sweep.compose.config import from_omegaconf
        from sweep.compose.render import render

        configured = self.configured.server.port
        if port == configured:
            return self.configured, render(self.configured)
        moved = copy.deepcopy(self.node)
        with open_dict(moved):
            OmegaConf.update(moved, PORT_KEY, port, merge=False)
        new = from_omegaconf(moved)
        new = dataclasses.replace(new, server=dataclasses.replace(new.server, configured_port=configured))
        return new, dataclasses.replace(render(new), identity=self.identity)


def place(node: Any, cfg: TrialConfig, overrides: Sequence[str]) -> tuple[TrialConfig, Launch, Ports | None]:
    """The trial's config and launch on the port its server will use, and how to move it
    again (None when the user set ``server.port``, or for a dry run: nothing moves)."""
    from sweep.compose.render import render

    launch = render(cfg)
    if cfg.dry_run or explicit(overrides):
        return cfg, launch, None
    import launchers

    ports = Ports(node, cfg, launch.fingerprint)
    port = launchers.get_launcher(cfg.launcher).pick_port(cfg.server.host, cfg.server.port)
    if port == cfg.server.port:
        return cfg, launch, ports
    return (*ports.at(port), ports)
