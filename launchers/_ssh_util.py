"""Small helpers of the ssh launcher: addresses, server info, the trial config of a job."""

from __future__ import annotations

import socket
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable

import httpx

if TYPE_CHECKING:
    from sweep.config import TrialConfig

MASK = "***"
LOOPBACK = ("127.0.0.1", "localhost", "::1")
INFO_PATHS = ("/get_server_info", "/server_info")


def loopback(host: str) -> bool:
    return host in LOOPBACK or host.startswith("127.")


def tcp_open(host: str, port: int, timeout: float = 1.0) -> bool:
    try:
        with socket.create_connection((host, port), timeout=timeout):
            return True
    except OSError:
        return False


def fetch_info(url: str, api_key: str | None, redact: Callable[[str], str],
               paths: tuple[str, ...] = INFO_PATHS) -> dict[str, Any]:
    """Version and server args (``server.info_paths``), secrets masked; {} if none answers."""
    headers = {"Authorization": f"Bearer {api_key}"} if api_key else {}
    try:
        with httpx.Client(timeout=5.0, headers=headers, trust_env=False) as client:
            for path in paths:
                try:
                    r = client.get(url + path)
                    data = r.json() if r.status_code == 200 else None
                except (httpx.HTTPError, ValueError):
                    continue
                if isinstance(data, dict):
                    return _mask(data, redact)
    except Exception:  # noqa: BLE001 - info is a nicety
        pass
    return {}


def _mask(value: Any, redact: Any, key: str = "") -> Any:
    """Mask secrets in /get_server_info (it echoes every server arg, the API key too)."""
    if isinstance(value, dict):
        return {k: _mask(v, redact, str(k)) for k, v in value.items()}
    if isinstance(value, list):
        return [_mask(v, redact) for v in value]
    if isinstance(value, str):
        k = key.lower()
        if value and (k.endswith(("api_key", "token", "secret", "password")) or "password" in k):
            return MASK
        return redact(value)
    return value


def trial_from_job_dir(trial_dir: Path) -> "TrialConfig | None":
    """The trial config Hydra saved for this job (for the pre-flight), if readable."""
    path = Path(trial_dir) / ".hydra" / "config.yaml"
    if not path.is_file():
        return None
    try:
        from omegaconf import OmegaConf

        from sweep.config import from_omegaconf

        return from_omegaconf(OmegaConf.load(path))
    except Exception:  # noqa: BLE001 - without it the pre-flight skips the hardware rows
        return None
