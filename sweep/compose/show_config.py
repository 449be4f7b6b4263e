"""``--cfg job|hydra|all`` (``-p PACKAGE``): what runs, printed with every secret masked.

Hydra prints the config itself, unresolved (``${sweep.python:}``,
``${spec.budget}``) and with secrets in clear -- ``server.api_key``, a
password inside a URL, a ``+launcher.ssh_pass=`` override listed again in
``hydra.overrides.task``. Here the job's part is printed resolved (what will
run; a secret set through ``${oc.env:...}`` then shows, so it is masked
too), Hydra's part as Hydra has it, both through :mod:`sweep.secrets` (by
name, by URL user info, by value), from the primary config the run uses.
"""

from __future__ import annotations

import sys
from typing import Any, Callable


def show(args: Any, compose: Callable[..., Any]) -> bool:
    """Print for ``--cfg``; False: not this case (Hydra handles the command line)."""
    if args.cfg not in ("job", "hydra", "all") or args.multirun or args.info:
        return False
    import yaml
    from omegaconf import OmegaConf

    import sweep.compose.resolvers  # noqa: F401  (registers ${sweep.*})
    from sweep import secrets

    cfg = compose(args.overrides, hydra_config=args.cfg != "job")
    hydra_node = _hydra_node(cfg, bool(getattr(args, "resolve", False))) if args.cfg != "job" else None
    if args.cfg != "job":
        from omegaconf import open_dict

        with open_dict(cfg):
            del cfg["hydra"]
    tree = OmegaConf.to_container(cfg, resolve=True)
    assert isinstance(tree, dict)
    overrides = list(args.overrides)
    red = secrets.redactor(secrets.collect_secrets(tree, overrides))
    out: dict[str, Any] = {}
    if args.cfg in ("job", "all"):
        out.update(secrets.mask_tree(tree, red))
    if hydra_node is not None:
        out["hydra"] = secrets.mask_tree(hydra_node, red, names=False)  # `hosts_key: ...` is no key
    if args.package and args.package != "_global_":
        node: Any = out
        for part in args.package.split("."):
            node = node.get(part) if isinstance(node, dict) else None
        if node is None:
            from sweep.errors import ConfigError

            raise ConfigError("--package", f"{args.package!r} is not in the config")
        sys.stdout.write(f"# @package {args.package}\n")
        out = node if isinstance(node, dict) else {args.package.rpartition(".")[2]: node}
    sys.stdout.write(yaml.safe_dump(out, sort_keys=False, default_flow_style=False))
    return True


def _hydra_node(cfg: Any, resolve: bool) -> Any:
    """Hydra's part as Hydra prints it: unresolved, or with ``--resolve`` resolved against the
    whole config, value by value (the sweeper's ``enqueue: ${spec.budget}`` is the composed
    spec's value); a ``${hydra:...}`` that needs a running job stays as written."""
    from omegaconf import DictConfig, ListConfig, OmegaConf
    from omegaconf.errors import OmegaConfBaseException

    def walk(node: Any) -> Any:
        if isinstance(node, DictConfig):
            keys: list[Any] = list(node.keys())
        elif isinstance(node, ListConfig):
            keys = list(range(len(node)))
        else:
            return node
        out: dict[Any, Any] = {}
        for key in keys:
            try:
                out[key] = walk(node[key])
            except OmegaConfBaseException:
                out[key] = OmegaConf.to_container(node, resolve=False)[key]  # type: ignore[index]
        return [out[k] for k in keys] if isinstance(node, ListConfig) else out

    if resolve:
        return walk(cfg.hydra)
    return OmegaConf.to_container(cfg.hydra, resolve=False)
