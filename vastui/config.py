"""Settings and paths, the API-key resolution (one function), and redaction of secrets.

Precedence: CLI flag > ``VASTUI_*`` / ``VAST_*`` environment > TOML in the platform config dir > defaults.
Nothing here runs at import time; ``load_settings`` reads the environment when called.
"""

from __future__ import annotations

import logging
import math
import os
import platform
import re
import tomllib
import urllib.parse
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path

import platformdirs

from vastui.errors import ConfigError

DEFAULT_URL = "https://console.vast.ai"
APP_NAME = "vastui"
REDACTED = "<redacted>"

log = logging.getLogger(__name__)


class Secret:
    """A secret string that never shows itself in ``repr``, ``str`` or f-strings.

    Use ``reveal()`` at the one place it must go on the wire.
    """

    __slots__ = ("_value",)

    def __init__(self, value: str) -> None:
        self._value = value

    def reveal(self) -> str:
        return self._value

    def __repr__(self) -> str:
        return f"Secret({REDACTED})"

    def __str__(self) -> str:
        return REDACTED

    def __format__(self, spec: str) -> str:
        return REDACTED

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Secret) and other._value == self._value

    def __hash__(self) -> int:
        return hash(self._value)

    def __bool__(self) -> bool:
        return bool(self._value)

    def __reduce__(self) -> str | tuple[object, ...]:
        raise TypeError("a Secret cannot be pickled")


@dataclass(frozen=True, slots=True)
class ResolvedKey:
    """The API key and where it came from (the source is safe to show, the key is not)."""

    key: Secret | None
    source: str


def official_key_file(home: Path) -> Path:
    return home / ".config" / "vastai" / "vast_api_key"


def resolve_api_key(*, explicit: str | None, env: Mapping[str, str], home: Path) -> ResolvedKey:
    """Resolve the Vast API key as the official CLI does: explicit > ``VAST_API_KEY`` > the CLI's key file."""
    if explicit:
        return ResolvedKey(checked_key(explicit, source="--api-key"), "--api-key")
    from_env = env.get("VAST_API_KEY", "").strip()
    if from_env:
        return ResolvedKey(checked_key(from_env, source="VAST_API_KEY"), "VAST_API_KEY")
    path = official_key_file(home)
    if path.is_file():
        key = read_key_file(path)
        if key is not None:
            return ResolvedKey(key, str(path))
    return ResolvedKey(None, "none")


def known_api_key() -> Secret | None:
    """The key this process would use without ``--api-key`` (``VAST_API_KEY``, else the official CLI's key file),
    for redacting it from messages; None when there is none or it cannot be read."""
    try:
        return resolve_api_key(explicit=None, env=os.environ, home=Path.home()).key
    except (ConfigError, RuntimeError):  # RuntimeError: no home directory to look in
        return None


# A key goes into an HTTP header: printable ASCII, no spaces. Anything else is refused before it is sent, and the
# message never quotes the key: a line break in it would carry its second part into an error text that the redactor,
# which knows the key whole, cannot recognise.
_KEY_TEXT = re.compile(r"^[\x21-\x7e]+$")


def checked_key(value: str, *, source: str) -> Secret:
    """The key from ``source`` as a Secret, or ConfigError (which names the source, never the key)."""
    value = value.strip()
    if "\n" in value or "\r" in value:
        raise ConfigError(f"the API key from {source} has more than one line; a key is one line (not shown here)",
                          title="Bad API key")
    if not _KEY_TEXT.match(value):
        raise ConfigError(f"the API key from {source} has a space, a control or a non-ASCII character, which no "
                          "key has (not shown here)", title="Bad API key")
    return Secret(value)


def read_key_file(path: Path) -> Secret | None:
    """The key written in ``path`` (None when the file is empty); warns when other users may read the file."""
    try:
        raw = path.read_bytes()
        mode = path.stat().st_mode & 0o777
    except OSError as exc:
        raise ConfigError(f"cannot read the API key file {path}: {exc.strerror}", title="Bad API key") from exc
    if mode & 0o077:
        log.warning("warning: the API key file %s can be read by other users (mode %04o); run chmod 600 %s",
                    path, mode, path)
    try:
        text = raw.decode("ascii")
    except UnicodeDecodeError:
        raise ConfigError(f"the API key file {path} is not plain ASCII text (a binary or otherwise encoded file?)",
                          title="Bad API key") from None  # the decode error would quote a byte of the key
    return checked_key(text, source=str(path)) if text.strip() else None


def resolve_sim_key(*, explicit: str | None, key_file: str | None, env: Mapping[str, str]) -> ResolvedKey:
    """The key ``vastui sim`` accepts: ``--api-key`` > ``--api-key-file`` > ``VASTUI_SIM_API_KEY``; none: the demo key.

    The file and the environment keep the key out of argv, which every user of the machine can read in ``ps``.
    """
    if explicit:
        return ResolvedKey(checked_key(explicit, source="--api-key"), "--api-key")
    if key_file:
        path = Path(key_file).expanduser()
        if not path.is_file():
            raise ConfigError(f"--api-key-file {path}: no such file", title="Bad API key")
        key = read_key_file(path)
        if key is None:
            raise ConfigError(f"--api-key-file {path}: the file is empty", title="Bad API key")
        return ResolvedKey(key, str(path))
    from_env = env.get("VASTUI_SIM_API_KEY", "").strip()
    if from_env:
        return ResolvedKey(checked_key(from_env, source="VASTUI_SIM_API_KEY"), "VASTUI_SIM_API_KEY")
    return ResolvedKey(None, "none")


def resolve_url(*, explicit: str | None, env: Mapping[str, str], source: str | None = None) -> str:
    """``--url`` > ``VAST_URL`` > the production console. Trailing slashes are dropped (they give ``//api``).

    A URL that cannot be sent is a one-line ConfigError naming where it came from (``source``, else ``--url`` or
    ``VAST_URL``), with any ``user:pass`` in it redacted.
    """
    if explicit:
        url, where = explicit, source or "--url"
    elif env.get("VAST_URL"):
        url, where = env["VAST_URL"], source or "VAST_URL"
    else:
        url, where = DEFAULT_URL, "the default"
    check_url(url, where=where)
    return url.rstrip("/")


# A URL vastui sends is printable ASCII (a non-ASCII host name is written in its xn-- form): http(s), then a host
# name, an IPv4 address or a bracketed IPv6 one, then an optional port.
_URL_SHAPE = re.compile(r"^(?i:https?)://(?:[^/?#\s]*@)?(?:\[[0-9A-Fa-f:.]+\]|[A-Za-z0-9._-]+)(?::[^/?#]*)?(?:[/?#]|$)")


def check_url(url: str, *, where: str) -> None:
    """Refuse a URL that is not text, holds a control character or a space, is not http(s) or has a bad host or
    port: a ConfigError naming ``where`` the URL came from (never quoting a URL that is not printable)."""
    try:
        url.encode("utf-8")
    except UnicodeEncodeError:
        raise ConfigError(f"the URL from {where} is not UTF-8 text", title="Bad URL") from None
    bad = next((i for i, ch in enumerate(url) if not "\x21" <= ch <= "\x7e"), None)
    if bad is not None:
        ch = url[bad]
        what = ("a space" if ch == " " else "a control character" if ord(ch) < 0x7f
                else "a non-ASCII character (write a non-ASCII host name in its xn-- form)")
        raise ConfigError(f"the URL from {where} has {what} at position {bad}", title="Bad URL")
    if not re.match(r"^https?://", url, re.IGNORECASE):
        raise ConfigError(f"the URL from {where} is not an http(s) URL: it must start with http:// or https://",
                          title="Bad URL")
    shown = redact_url_passwords(url)
    try:
        parts = urllib.parse.urlsplit(url)
        parts.port  # noqa: B018 - reading it checks it: a port that is not a number or past 65535 raises here
    except ValueError as exc:
        raise ConfigError(f"the URL from {where} is not a usable URL: {shown!r} "
                          f"({redact_url_passwords(str(exc))})", title="Bad URL") from None
    if not parts.hostname or not _URL_SHAPE.match(url):
        raise ConfigError(f"the URL from {where} is not a usable URL: {shown!r} (no host, or a host name that is "
                          "not letters, digits, dots and dashes)", title="Bad URL")


_URL_PASSWORD = re.compile(r"(?i)\b([a-z][a-z0-9+.-]*://)[^/?#\s]*@")


def redact_url_passwords(text: str) -> str:
    """``text`` with the ``user:pass@`` of every URL in it replaced (a URL's password is a secret too)."""
    return _URL_PASSWORD.sub(r"\1" + REDACTED + "@", text)


POSTGRES_SCHEMES = ("postgresql://", "postgres://")


def without_password(url: str) -> str:
    """A URL as a printed command may carry it: any password taken out (the user stays)."""
    parts = urllib.parse.urlsplit(url)
    if parts.password is None:   # (an empty password, "user:@host", is taken out too: nothing to show)
        return url
    host = parts.hostname or ""
    if ":" in host:
        host = f"[{host}]"
    netloc = (f"{parts.username}@" if parts.username else "") + host + (f":{parts.port}" if parts.port else "")
    return urllib.parse.urlunsplit(parts._replace(netloc=netloc))


def default_operator(env: Mapping[str, str]) -> str:
    """Who this operator is when the config does not say: the login name and this machine's name."""
    user = env.get("USER") or env.get("LOGNAME") or "operator"
    return f"{user}@{platform.node() or 'localhost'}"


class Redactor:
    """Replaces every known secret in a text. Every log line, receipt and error shown passes through one."""

    def __init__(self, secrets: Iterable[Secret | str | None] = ()) -> None:
        self._values: set[str] = set()
        for secret in secrets:
            self.add(secret)

    def add(self, secret: Secret | str | None) -> None:
        value = secret.reveal() if isinstance(secret, Secret) else secret
        if value and len(value) >= 4:
            self._values.add(value)

    def __call__(self, text: str) -> str:
        for value in sorted(self._values, key=len, reverse=True):
            text = text.replace(value, REDACTED)
        text = redact_url_passwords(text)
        # Bearer tokens that slipped through from any source
        return re.sub(r"(?i)(bearer\s+)[A-Za-z0-9._~+/=-]{8,}", r"\1" + REDACTED, text)


@dataclass(frozen=True, slots=True)
class StandingDestroy:
    """A standing approval for ``vastui watch`` to destroy leaks, written in the config file's ``[watch.destroy]``
    table: only an instance listed as leaked (or, with ``include_unowned``, not vastui's) for at least
    ``older_than_s`` since it started, billing at most ``max_usd_per_h``, whose label matches one of ``labels``
    (shell patterns; ``*`` also matches an instance with no label). ``source`` says where it was written."""

    older_than_s: float
    max_usd_per_h: float
    labels: tuple[str, ...]
    include_unowned: bool
    source: str

    def describe(self) -> str:
        whose = "leaked or not vastui's" if self.include_unowned else "leaked"
        return (f"{whose} instances running {self.older_than_s / 60:g} min or more, billing at most "
                f"${self.max_usd_per_h:g}/h, labelled {' or '.join(self.labels)} ({self.source})")


@dataclass(frozen=True, slots=True)
class WatchSettings:
    """``vastui watch``: the config file's ``[watch]`` table (docs/architecture.md, The leak watch)."""

    interval_s: float = 300.0           # between rounds (marketplace time)
    quiet_s: float = 86400.0            # one condition alerts once per this long
    runway_h: float = 24.0              # alert when credit at the current burn lasts less than this
    blind_rounds: int = 3               # alert when this many rounds in a row could not read the whole listing
    webhook_url: Secret | None = None   # a Slack-compatible incoming webhook (its URL is a credential)
    destroy: StandingDestroy | None = None


@dataclass(frozen=True, slots=True)
class Settings:
    """Everything a vastui process needs to know about its environment."""

    url: str
    api_key: ResolvedKey
    config_dir: Path
    data_dir: Path
    db_path: Path                             # the SQLite store (the embedded default)
    ssh_key_path: Path | None
    known_hosts_path: Path
    theme: str | None = None                  # the console's theme (a themes/*.tcss name); None: the default
    money_confirm_over_usd: float = 20.0      # console: a prepay or transfer above this must be typed to confirm
    approval_expiry_s: float = 900.0          # a campaign's request waits this long (wall time) for an answer
    db_url: str | None = None                 # a team's PostgreSQL store, when chosen: it replaces db_path
    operator: str = "operator"                # who this operator is, in a shared store (config ``operator``)
    watch: WatchSettings = WatchSettings()    # ``vastui watch`` (config ``[watch]``)

    @property
    def db(self) -> str | Path:
        """The store to open (``vastui.store.open_store``): the PostgreSQL URL when one is set, else the file."""
        return self.db_url if self.db_url is not None else self.db_path

    @property
    def db_shown(self) -> str:
        """The store as messages and printed commands name it: the file, or the URL without its password."""
        if self.db_url is None:
            return str(self.db_path)
        return without_password(self.db_url)


def _read_toml(path: Path) -> dict[str, object]:
    if not path.is_file():
        return {}
    try:
        with path.open("rb") as fh:
            return tomllib.load(fh)
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(f"{path}: {exc}") from exc
    except UnicodeDecodeError as exc:
        raise ConfigError(f"{path}: not UTF-8 text (byte {exc.start}); TOML files are UTF-8") from exc
    except RecursionError as exc:
        raise ConfigError(f"{path}: nested too deeply to read") from exc
    except OSError as exc:
        raise ConfigError(f"cannot read {path}: {exc.strerror}") from exc


def ensure_folder(path: Path, *, what: str) -> Path:
    """Create ``path`` (and its parents) if missing; ConfigError naming ``what`` and the path when it cannot be."""
    try:
        path.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        blocker = next((p for p in (path, *path.parents) if p.exists() and not p.is_dir()), None)
        why = f"{blocker} is a file, not a folder" if blocker is not None else exc.strerror
        raise ConfigError(f"cannot create the {what} {path}: {why}") from exc
    return path


def load_settings(
    *,
    url: str | None = None,
    api_key: str | None = None,
    db_path: str | None = None,
    ssh_key: str | None = None,
    env: Mapping[str, str] | None = None,
    home: Path | None = None,
) -> Settings:
    """Build Settings from flags, environment, the config file and defaults (in that order)."""
    env = os.environ if env is None else env
    home = Path.home() if home is None else home
    config_dir = Path(env.get("VASTUI_CONFIG_DIR") or platformdirs.user_config_dir(APP_NAME))
    data_dir = Path(env.get("VASTUI_DATA_DIR") or platformdirs.user_data_dir(APP_NAME))
    file_cfg = _read_toml(config_dir / "config.toml")

    def pick(flag: str | None, env_name: str, key: str, *, number: bool = False) -> str | None:
        if flag:
            return flag
        if env.get(env_name):
            return env[env_name]
        value = file_cfg.get(key)
        if value is None:
            return None
        # a path written as a number (db_path = 7) would silently become ./7: only the type the key takes is read
        allowed: tuple[type, ...] = (int, float) if number else (str,)
        if isinstance(value, bool) or not isinstance(value, allowed):
            raise ConfigError(f"{config_dir / 'config.toml'}: {key} must be {'a number' if number else 'a string'}, "
                              f"not {type(value).__name__}")
        return str(value)

    url_source = ("--url" if url else "VAST_URL" if env.get("VAST_URL")
                  else f"{config_dir / 'config.toml'} (url)")
    resolved_url = resolve_url(explicit=pick(url, "VAST_URL", "url"), env={}, source=url_source)
    db_text = pick(db_path, "VASTUI_DB", "db_path") or pick(None, "VASTUI_DB_URL", "db_url")
    db_url = db_text if db_text is not None and db_text.startswith(POSTGRES_SCHEMES) else None
    if db_url is None and db_text is not None and "://" in db_text:
        raise ConfigError(f"the store must be a SQLite file or a postgresql:// URL, not {without_password(db_text)!r}")
    db = Path(db_text) if db_text is not None and db_url is None else data_dir / "vastui.sqlite3"
    operator = (pick(None, "VASTUI_OPERATOR", "operator") or default_operator(env)).strip()
    if not operator or len(operator) > 64 or not operator.isprintable():
        raise ConfigError(f"operator must be a short printable name (who you are in a team's store), not {operator!r}")
    ssh = pick(ssh_key, "VASTUI_SSH_KEY", "ssh_key")
    theme = pick(None, "VASTUI_THEME", "theme")
    threshold_text = pick(None, "VASTUI_MONEY_CONFIRM_OVER_USD", "money_confirm_over_usd",
                          number=True) or "20"
    try:
        threshold = float(threshold_text)
    except ValueError as exc:
        raise ConfigError(f"money_confirm_over_usd must be a number of USD, not {threshold_text!r}") from exc
    if not threshold >= 0:
        raise ConfigError(f"money_confirm_over_usd must be zero or more, not {threshold_text!r}")
    expiry_text = pick(None, "VASTUI_APPROVAL_EXPIRY_MIN", "approval_expiry_min", number=True) or "15"
    try:
        expiry_min = float(expiry_text)
    except ValueError as exc:
        raise ConfigError(f"approval_expiry_min must be a number of minutes, not {expiry_text!r}") from exc
    if not (math.isfinite(expiry_min) and expiry_min > 0):
        raise ConfigError(f"approval_expiry_min must be a positive number of minutes, not {expiry_text!r}")
    default_ssh = home / ".ssh" / "id_ed25519"
    ssh_path = Path(ssh).expanduser() if ssh else (default_ssh if default_ssh.is_file() else None)
    return Settings(
        url=resolved_url,
        api_key=resolve_api_key(explicit=api_key, env=env, home=home),
        config_dir=config_dir,
        data_dir=data_dir,
        db_path=db,
        db_url=db_url,
        operator=operator,
        ssh_key_path=ssh_path,
        known_hosts_path=data_dir / "known_hosts",
        theme=theme,
        money_confirm_over_usd=threshold,
        approval_expiry_s=60.0 * expiry_min,
        watch=watch_settings(file_cfg.get("watch"), where=f"{config_dir / 'config.toml'}", env=env),
    )


def watch_settings(table: object, *, where: str, env: Mapping[str, str]) -> WatchSettings:
    """The ``[watch]`` table (None: none written) as WatchSettings; ConfigError naming the file and key when a
    value is not what it must be. ``VASTUI_WEBHOOK_URL`` replaces the table's ``webhook_url``."""
    if table is None:
        table = {}
    if not isinstance(table, Mapping):
        raise ConfigError(f"{where}: watch must be a table ([watch]), not {type(table).__name__}")
    known = {"interval_min", "quiet_min", "runway_h", "blind_rounds", "webhook_url", "destroy"}
    _refuse_unknown(table, known, where=f"{where} [watch]")
    defaults = WatchSettings()
    interval = _positive(table, "interval_min", defaults.interval_s / 60, where=where) * 60
    quiet = _positive(table, "quiet_min", defaults.quiet_s / 60, where=where, zero=True) * 60
    runway = _positive(table, "runway_h", defaults.runway_h, where=where, zero=True)
    blind = _positive(table, "blind_rounds", defaults.blind_rounds, where=where)
    if blind != int(blind):
        raise ConfigError(f"{where}: watch.blind_rounds must be a whole number of rounds, not {blind}")
    hook_text = env.get("VASTUI_WEBHOOK_URL") or table.get("webhook_url")
    webhook = None
    if hook_text is not None:
        if not isinstance(hook_text, str) or not hook_text.startswith(("https://", "http://")):
            raise ConfigError(f"{where}: watch.webhook_url (or VASTUI_WEBHOOK_URL) must be an http(s) URL "
                              "(not shown: a webhook's URL is its password)")
        webhook = Secret(hook_text)
    return WatchSettings(interval_s=interval, quiet_s=quiet, runway_h=runway, blind_rounds=int(blind),
                         webhook_url=webhook, destroy=_standing_destroy(table.get("destroy"), where=where))


def _standing_destroy(table: object, *, where: str) -> StandingDestroy | None:
    if table is None:
        return None
    if not isinstance(table, Mapping):
        raise ConfigError(f"{where}: watch.destroy must be a table ([watch.destroy]), not {type(table).__name__}")
    _refuse_unknown(table, {"older_than_min", "max_usd_per_h", "labels", "include_unowned"},
                    where=f"{where} [watch.destroy]")
    missing = [key for key in ("older_than_min", "max_usd_per_h", "labels") if key not in table]
    if missing:
        raise ConfigError(f"{where}: [watch.destroy] is a standing approval to destroy and must say every limit: "
                          f"{', '.join(missing)} missing")
    labels = table["labels"]
    if (not isinstance(labels, list) or not labels
            or not all(isinstance(label, str) and label for label in labels)):
        raise ConfigError(f"{where}: watch.destroy.labels must be a list of label patterns, e.g. [\"vastui-*\"]")
    unowned = table.get("include_unowned", False)
    if not isinstance(unowned, bool):
        raise ConfigError(f"{where}: watch.destroy.include_unowned must be true or false")
    return StandingDestroy(
        older_than_s=60 * _positive(table, "older_than_min", 0, where=where, prefix="watch.destroy."),
        max_usd_per_h=_positive(table, "max_usd_per_h", 0, where=where, prefix="watch.destroy."),
        labels=tuple(labels), include_unowned=unowned, source=f"{where} [watch.destroy]")


def _refuse_unknown(table: Mapping[str, object], known: set[str], *, where: str) -> None:
    unknown = sorted(set(table) - known)
    if unknown:
        raise ConfigError(f"{where}: unknown key(s) {', '.join(unknown)} (known: {', '.join(sorted(known))})")


def _positive(table: Mapping[str, object], key: str, default: float, *, where: str, zero: bool = False,
              prefix: str = "watch.") -> float:
    value = table.get(key, default)
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value) \
            or value < 0 or (value == 0 and not zero):
        raise ConfigError(f"{where}: {prefix}{key} must be a {'non-negative' if zero else 'positive'} number, "
                          f"not {value!r}")
    return float(value)
