"""Which names are secret, and masking of their values wherever they could appear.

The one owner of secrets: every result file, log line, MLflow param, tag and
artifact, printed command and Hydra file goes through this module before it
leaves the process. Two rules, applied together:

* **by name** -- a value under a secret name is masked: a config key or an
  environment variable whose name has one of the words :data:`SECRET_WORDS`
  (pass, password, passphrase, secret, credential, auth ...: ``ssh_pass``,
  ``basic_auth``, ``DB_PASSWORD``) or ends in :data:`SECRET_LAST_WORDS` (key,
  token: ``api_key``, ``HF_TOKEN``; ``key_filename`` is a path), or matches
  :data:`NAME_PATTERNS` (glued forms: ``APIKEY``, ``clientSecret``; the
  config's ``secret_names`` adds more), a command-line flag named like one
  (``--api-key X``, ``--api-key=X``) or listed in ``server.secret_flags``, a
  Hydra override (``server.api_key=sk-...``, ``+launcher.ssh_pass=...``);
* **by URL user info** -- the password of ``scheme://user:password@host`` in any
  value (a tracking URI, a storage URL, a path key holding a URL) is masked;
* **by value** -- every value found by name or in a URL (in the environment,
  the composed config, the launch) is masked wherever it appears in free text,
  so a token that came in through ``${oc.env:HF_TOKEN}`` is masked in the server
  log and in the rendered command as well as under its key.

Only strings are secrets (``experts_per_token: 8`` is a number, not a token).
A value shorter than :data:`MIN_VALUE_LEN` or a common word (``true``,
``none``) is masked by name only, never by value, so masking cannot garble a
log; an interpolation (``${oc.env:HF_TOKEN}``) names a secret but holds none,
and is left as it is.
"""

from __future__ import annotations

import fnmatch
import logging
import os
import re
import threading
from typing import Any, Iterable, Mapping, Sequence

MASK = "***"
# Names (config keys, environment variables, flags) whose values are secrets; judged on the
# last dotted part, camelCase and dashes split into words at "_", case-insensitively.
SECRET_WORDS = frozenset({"PASS", "PASSWORD", "PASSWD", "PASSPHRASE", "SECRET", "SECRETS",
                          "CREDENTIAL", "CREDENTIALS", "CREDS", "AUTH", "AUTHORIZATION", "APIKEY"})
SECRET_LAST_WORDS = frozenset({"KEY", "TOKEN"})   # api_key, HF_TOKEN (but key_filename, token_ids)
NAME_PATTERNS = ("*SECRET*", "*PASSWORD*", "*PASSWD*", "*PASSPHRASE*", "*CREDENTIAL*", "*APIKEY*",
                 "*TOKEN", "*_KEY")        # glued forms: CLIENTSECRET, DBPASSWORD, ACCESSTOKEN
# Names that hold no secret although a word says so (an agent's socket path, not a key).
NOT_SECRET_NAMES = frozenset({"SSH_AUTH_SOCK", "AUTH_SOCK", "GPG_AGENT_INFO"})
MIN_VALUE_LEN = 6  # a shorter value (a PIN, "test") would garble paths and logs if masked by value
NOT_SECRETS = frozenset({"true", "false", "none", "null", "yes", "no", MASK})

_lock = threading.Lock()
_extra_patterns: set[str] = set()
_remembered: set[str] = set()
# ``name=value`` / ``name: value`` (an override, an env assignment, ServerArgs(api_key='...'))
# and ``--flag value``: the name decides whether the value is masked.
_ASSIGNMENT = re.compile(r"(?P<name>[A-Za-z_+~][\w.+~-]*)(?P<sep>=|:[ \t]*)(?P<quote>['\"]?)"
                         r"(?P<value>[^\s'\",)\]}]+)")
_FLAG_VALUE = re.compile(r"(?P<flag>--[A-Za-z][\w-]*)(?P<sep>[ \t]+|,)(?P<quote>['\"]?)"
                         r"(?P<value>[^\s'\",\]}]+)")
# one more value of a sweep after a secret's (``,b`` of ``api_key=a,b``), not a next assignment
_SWEPT_VALUE = re.compile(r",(?![\w.+~-]*[=:])[^\s'\",)\]}]+")
# user:password@ in a URL (a tracking URI of a database or a server)
_URL_PASSWORD = re.compile(r"(?P<head>[A-Za-z][\w+.-]*://[^\s:/@]+:)(?P<password>[^\s@/]+)(?=@)")


# ------------------------------------------------------------------------------ names


def configure(names: Iterable[str] = ()) -> None:
    """Add name patterns (the config's ``secret_names``) for the rest of this process."""
    with _lock:
        _extra_patterns.update(str(n).upper() for n in names if str(n).strip())


_CAMEL = re.compile(r"(?<=[a-z0-9])(?=[A-Z])")


def _normalize(name: str) -> str:
    name = str(name).strip().lstrip("+~-").rpartition(".")[2]
    return _CAMEL.sub("_", name).replace("-", "_").upper()


def is_secret_name(name: str) -> bool:
    """Whether values under ``name`` are secrets (a key, an env var, a flag or a dotted path)."""
    norm = _normalize(name)
    if not norm or norm in NOT_SECRET_NAMES:
        return False
    words = [w for w in norm.split("_") if w]
    if words and (words[-1] in SECRET_LAST_WORDS or any(w in SECRET_WORDS for w in words)):
        return True
    glued = norm.replace("_", "")
    return any(fnmatch.fnmatchcase(norm, p) or fnmatch.fnmatchcase(glued, p)
               for p in (*NAME_PATTERNS, *_extra_patterns))


def is_secret_flag(flag: str, flags: Iterable[str] = ()) -> bool:
    """``--api-key`` and the like, or one of ``server.secret_flags``."""
    return flag.startswith("-") and (flag in set(flags) or is_secret_name(flag))


def secret_value(value: Any) -> str | None:
    """``value`` if it can be masked by value wherever it appears, else None."""
    if not isinstance(value, str):
        return None
    value = value.strip()
    if len(value) < MIN_VALUE_LEN or value.lower() in NOT_SECRETS or _reference(value):
        return None
    return value


def _reference(value: str) -> bool:
    """An interpolation (``${oc.env:HF_TOKEN}``; a multirun's job overrides carry it
    escaped, ``$\\{oc.env\\:HF_TOKEN\\}``): it names a secret, it holds none."""
    return "${" in value or "$\\{" in value


def _number(text: str) -> bool:
    try:
        float(text)
    except ValueError:
        return False
    return True


# ------------------------------------------------------------------------------ values


def from_environ(environ: Mapping[str, str] | None = None) -> set[str]:
    """Values of secret-named environment variables (where ``${oc.env:...}`` secrets come from)."""
    env = os.environ if environ is None else environ
    return {s for name, value in env.items() if is_secret_name(name) and (s := secret_value(value))}


def collect_secrets(*trees: Any, environ: Mapping[str, str] | None = None) -> set[str]:
    """Values under secret names in the given trees (mappings, lists, override
    strings ``key=value``) and in the environment."""
    found: set[str] = set()

    def walk(node: Any) -> None:
        if isinstance(node, Mapping):
            for k, v in node.items():
                if is_secret_name(str(k)) and (s := secret_value(v)):
                    found.add(s)
                walk(v)
        elif isinstance(node, (list, tuple)):
            found.update(argv_secrets([v for v in node if isinstance(v, str)]))
            for v in node:
                walk(v)
        elif isinstance(node, str):
            found.update(_assigned_secrets(node))

    for tree in trees:
        walk(tree)
    return found | from_environ(environ)


def url_secrets(text: str) -> set[str]:
    """Passwords of ``scheme://user:password@host`` in ``text`` (and their percent-decoded form)."""
    from urllib.parse import unquote

    out = set()
    if "://" in text:
        for m in _URL_PASSWORD.finditer(text):
            for value in {m.group("password"), unquote(m.group("password"))}:
                if len(value) >= 3 and value.lower() not in NOT_SECRETS and not _reference(value):
                    out.add(value)
    return out


def _assigned_secrets(text: str) -> set[str]:
    out = url_secrets(text)
    for m in _ASSIGNMENT.finditer(text):
        if is_secret_name(m.group("name")) and (s := secret_value(m.group("value"))) and not _number(s):
            out.add(s)
    for m in _FLAG_VALUE.finditer(text):
        if is_secret_flag(m.group("flag")) and (s := secret_value(m.group("value"))) and not _number(s):
            out.add(s)
    return out


def argv_secrets(argv: Sequence[str], flags: Iterable[str] = ()) -> set[str]:
    """Values of secret flags in an argument list: ``--api-key X`` and ``--api-key=X``."""
    flags = tuple(flags)
    out: set[str] = set()
    for i, word in enumerate(argv):
        name, eq, value = word.partition("=")
        if eq and is_secret_flag(name, flags) and value:
            out.add(value)
        elif is_secret_flag(word, flags) and i + 1 < len(argv) and argv[i + 1]:
            out.add(argv[i + 1])
    return out


def env_secrets(env: Mapping[str, Any]) -> set[str]:
    """Values of secret-named variables of an environment mapping (numbers are no secrets)."""
    return {str(v) for k, v in env.items() if is_secret_name(str(k)) and isinstance(v, str) and v
            and v.lower() not in NOT_SECRETS and not _reference(v) and not _number(v)}


def found_in(texts: Iterable[str], environ: Mapping[str, str] | None = None) -> set[str]:
    """The secrets ``texts`` hold, whatever brought them there: a value after a secret name
    (``HF_TOKEN=...``, ``--token ...``, ``api_key: ...``), a URL's password, or the value of a
    secret-named environment variable (``${oc.env:HF_TOKEN}`` resolved into a config file's line)
    or one this process was told to mask. One rule for a text that will leave the process verbatim
    (a SLURM job script) wherever its lines came from: the command line, a config file, the
    environment."""
    texts = [t for t in texts if isinstance(t, str)]
    found: set[str] = set()
    for text in texts:
        found |= _assigned_secrets(text)
    for value in from_environ(environ) | (set(_remembered) if environ is None else set()):
        if any(value in text for text in texts):
            found.add(value)
    return found


def remember(values: Iterable[Any]) -> None:
    """Mask these values by value in everything this process writes from now on."""
    with _lock:
        _remembered.update(s for v in values if (s := secret_value(v)))


def known() -> set[str]:
    """Every value this process masks by value: remembered ones and the environment's."""
    with _lock:
        return set(_remembered) | from_environ()


# ------------------------------------------------------------------------------ masking


class Redactor:
    """Masks a fixed set of secret values (and secret-named assignments) in text.

    A snapshot: the server log pump builds one per server, so each line costs
    only the replacements.
    """

    def __init__(self, values: Iterable[str] = ()) -> None:
        self.values = sorted({v for v in values if v}, key=len, reverse=True)

    def text(self, text: str) -> str:
        for value in self.values:
            text = text.replace(value, MASK)
        return _mask_assignments(text)


def _maskable(value: str) -> bool:
    """A value after a secret name in free text: masked unless it is no secret at all
    (None, a number such as ``experts_per_token=8``, an interpolation, *** already)."""
    return secret_value(value) is not None and not _number(value)


def _scan_assignments(text: str) -> str:
    """Every ``name=value`` / ``name: value`` with a secret name, its value masked -- and the
    values a sweep lists after it (``server.api_key=a,b``). A non-secret match gives up only its
    name: its "value" may be the next assignment (``error: server.api_key: sk-...``)."""
    out: list[str] = []
    pos = 0
    while m := _ASSIGNMENT.search(text, pos):
        out.append(text[pos:m.start("value")])
        if is_secret_name(m.group("name")) and _maskable(m.group("value")):
            out.append(MASK)
            pos = m.end()
            while more := _SWEPT_VALUE.match(text, pos):
                pos = more.end()
        else:
            pos = m.start("value")
    out.append(text[pos:])
    return "".join(out)


def _mask_assignments(text: str) -> str:
    def flag_value(m: re.Match[str]) -> str:
        if not is_secret_flag(m.group("flag")) or not _maskable(m.group("value")):
            return m.group(0)
        return f"{m.group('flag')}{m.group('sep')}{m.group('quote')}{MASK}"

    if "=" in text or ":" in text:
        text = _scan_assignments(text)
    if "--" in text:
        text = _FLAG_VALUE.sub(flag_value, text)
    if "://" in text:
        text = _URL_PASSWORD.sub(lambda m: m.group("head") + MASK, text)
    return text


def redactor(values: Iterable[str] = ()) -> Redactor:
    """A Redactor for ``values`` plus every value this process knows (:func:`known`)."""
    return Redactor(set(values) | known())


def mask_text(text: str, values: Iterable[str] = ()) -> str:
    """``text`` with every known secret value and every secret-named assignment masked."""
    return redactor(values).text(text)


def mask_tree(node: Any, red: Redactor | None = None, *, names: bool = True) -> Any:
    """A copy with strings under secret names replaced by ***, every other string
    masked by ``red`` (default: every known value). Numbers are not secrets
    (``experts_per_token: 8``). ``names=False``: by value only -- for Hydra's own
    settings, where ``hosts_key: launcher.hosts`` holds no key."""
    return _mask_tree(node, red if red is not None else redactor(), names)


def _mask_tree(node: Any, red: Redactor, names: bool) -> Any:
    if isinstance(node, Mapping):
        return {k: (MASK if names and is_secret_name(str(k)) and isinstance(v, str) and v
                    and not _reference(v) else _mask_tree(v, red, names)) for k, v in node.items()}
    if isinstance(node, (list, tuple)):
        return [_mask_tree(v, red, names) for v in node]
    if isinstance(node, str):
        return red.text(node)
    return node


def mask_argv(argv: Sequence[str], flags: Iterable[str] = (), values: Iterable[str] = ()) -> list[str]:
    """An argument list with the values of secret flags (and known values) masked."""
    flags, red = tuple(flags), redactor(values)
    out: list[str] = []
    for i, word in enumerate(argv):
        name, eq, value = word.partition("=")
        if i > 0 and is_secret_flag(argv[i - 1], flags) and "=" not in argv[i - 1]:
            out.append(MASK)
        elif eq and value and is_secret_flag(name, flags):
            out.append(f"{name}={MASK}")
        else:
            out.append(red.text(word))
    return out


def mask_env(env: Mapping[str, Any], values: Iterable[str] = ()) -> dict[str, Any]:
    """An environment mapping with secret-named variables (and known values) masked."""
    red = redactor(values)
    return {k: (MASK if is_secret_name(str(k)) and v else red.text(v) if isinstance(v, str) else v)
            for k, v in env.items()}


# ------------------------------------------------------------------------------ logging


def install_log_masking() -> None:
    """Mask every log record of this process (Hydra's own lines list the overrides)."""
    old = logging.getLogRecordFactory()
    if getattr(old, "_specsweep_masking", False):
        return

    def factory(*args: Any, **kwargs: Any) -> logging.LogRecord:
        record = old(*args, **kwargs)
        try:
            message = record.getMessage()
        except Exception:  # noqa: BLE001 - a bad format string is logging's to report
            return record
        masked = mask_text(message)
        if masked != message:
            record.msg, record.args = masked, ()
        return record

    factory._specsweep_masking = True  # type: ignore[attr-defined]
    logging.setLogRecordFactory(factory)
