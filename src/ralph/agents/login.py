"""Whether an agent CLI has credentials, as `ralph doctor` reports it.

Read from the places each pinned CLI reads (tests/agents/package.json): the environment the
agent's process gets (Ralph's own, with `[agents.<name>] env` over it) and the CLI's credential
files. Never a network call, never a secret's value: what is found is named by the variable's
name or the file's path, and a file is only read for the names of its keys. `logged_in` is
False only when the CLI would find nothing either; where credentials may sit in an OS keychain
or come from a cloud login, it is None (cannot tell).
"""

from __future__ import annotations

import json
import re
import sys
import tomllib
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

from ralph.agents.base import Login

CODEX_KEY_ENV = ("CODEX_API_KEY",)  # `codex exec` sends it; OPENAI_API_KEY it does not
CLAUDE_KEY_ENV = ("ANTHROPIC_API_KEY", "ANTHROPIC_AUTH_TOKEN", "CLAUDE_CODE_OAUTH_TOKEN")
CLAUDE_CLOUD_ENV = ("CLAUDE_CODE_USE_BEDROCK", "CLAUDE_CODE_USE_VERTEX", "CLAUDE_CODE_USE_FOUNDRY")
# opencode's providers and the variables it takes their keys from (its bundled models.dev
# catalogue); any other provider `<ID>_API_KEY`, the catalogue's usual name.
OPENCODE_PROVIDER_ENV: dict[str, tuple[str, ...]] = {
    "anthropic": ("ANTHROPIC_API_KEY",),
    "openai": ("OPENAI_API_KEY",),
    "google": ("GOOGLE_GENERATIVE_AI_API_KEY", "GEMINI_API_KEY", "GOOGLE_API_KEY"),
    "google-vertex": ("GOOGLE_APPLICATION_CREDENTIALS", "GOOGLE_VERTEX_PROJECT"),
    "amazon-bedrock": ("AWS_BEARER_TOKEN_BEDROCK", "AWS_ACCESS_KEY_ID"),
    "azure": ("AZURE_API_KEY",),
    "github-copilot": ("GITHUB_TOKEN",),
    "openrouter": ("OPENROUTER_API_KEY",),
    "opencode": ("OPENCODE_API_KEY",),
    "xai": ("XAI_API_KEY",),
    "zai": ("ZHIPU_API_KEY",),
    "moonshotai": ("MOONSHOT_API_KEY",),
    "togetherai": ("TOGETHER_API_KEY",),
}
_ENV_REF = re.compile(r"^\{env:(\w+)\}$")  # opencode's "apiKey": "{env:MY_KEY}"
_DOTENV_NAME = re.compile(r"^\s*(?:export\s+)?([A-Za-z_]\w*)\s*=\s*\S", re.MULTILINE)


# -- what every CLI shares ------------------------------------------------------------------

def home_dir(env: Mapping[str, str]) -> Path:
    """The HOME the agent's process gets."""
    return Path(env.get("HOME") or Path.home())


def dir_from(env: Mapping[str, str], name: str, default: Path) -> Path:
    """A directory a CLI takes from an environment variable, else its default."""
    return Path(env[name]) if env.get(name) else default


def set_names(env: Mapping[str, str], names: Iterable[str]) -> list[str]:
    """The variables of `names` that are set to something (their names, not values)."""
    return [name for name in names if env.get(name, "").strip()]


def json_object(path: Path) -> dict[str, Any] | None:
    """A JSON file's top-level object, None if it is missing or is not one."""
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    return data if isinstance(data, dict) else None


def toml_object(path: Path) -> dict[str, Any] | None:
    """A TOML file's table: {} if there is no file, None if it cannot be read."""
    try:
        return tomllib.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        return {}
    except (OSError, ValueError):
        return None


def shown(path: Path, env: Mapping[str, str]) -> str:
    """A path as a user reads it: under HOME as ~/..."""
    try:
        return "~/" + path.relative_to(home_dir(env)).as_posix()
    except ValueError:
        return str(path)


def _env_found(names: list[str]) -> str:
    return ", ".join(names) + " (environment)"


def _table(data: Mapping[str, Any] | None, *keys: str) -> dict[str, Any]:
    """data[k1][k2]... as a table, {} where a level is missing or not a table."""
    value: Any = data or {}
    for key in keys:
        value = value.get(key) if isinstance(value, dict) else None
    return value if isinstance(value, dict) else {}


# -- codex ----------------------------------------------------------------------------------

def codex_login(env: Mapping[str, str], hint: str) -> Login:
    """$CODEX_HOME/config.toml decides which provider codex talks to: a custom provider takes
    its key from its `env_key` variable; OpenAI's from `codex login` ($CODEX_HOME/auth.json,
    or the OS keyring with cli_auth_credentials_store = "keyring"/"auto") or CODEX_API_KEY."""
    codex_home = dir_from(env, "CODEX_HOME", home_dir(env) / ".codex")
    config_path = codex_home / "config.toml"
    config = toml_object(config_path)
    if config is None:
        return Login(None, f"cannot read {shown(config_path, env)}")
    provider = config.get("model_provider") or "openai"
    table = _table(config, "model_providers", str(provider))
    if provider != "openai" and not table.get("requires_openai_auth"):
        key = table.get("env_key")
        if not table or not isinstance(key, str):
            return Login(None, f"model provider '{provider}' names no env_key: nothing to check")
        if set_names(env, [key]):
            return Login(True, _env_found([key]))
        return Login(False, f"set {key} (the env_key of model provider '{provider}' in "
                            f"{shown(config_path, env)})")
    names = set_names(env, CODEX_KEY_ENV)
    if names:
        return Login(True, _env_found(names))
    auth = codex_home / "auth.json"
    if auth.is_file():
        return Login(True, shown(auth, env))
    store = config.get("cli_auth_credentials_store")
    if store in ("keyring", "auto"):
        return Login(None, f"cli_auth_credentials_store = \"{store}\": the OS keyring is not "
                           "checked")
    return Login(False, hint)


# -- claude ---------------------------------------------------------------------------------

def claude_login(env: Mapping[str, str], hint: str) -> Login:
    """ANTHROPIC_API_KEY, ANTHROPIC_AUTH_TOKEN or CLAUDE_CODE_OAUTH_TOKEN; a login kept in
    $CLAUDE_CONFIG_DIR/.credentials.json (default ~/.claude; the macOS keychain on a Mac); a
    key saved by /login (`primaryApiKey` in ~/.claude.json, $CLAUDE_CONFIG_DIR/.claude.json
    when that is set); an `apiKeyHelper` in its settings.json. Bedrock, Vertex and Foundry
    use their cloud's credentials: not checked."""
    names = set_names(env, CLAUDE_KEY_ENV)
    if names:
        return Login(True, _env_found(names))
    cloud = [name for name in CLAUDE_CLOUD_ENV if env.get(name, "").lower() in ("1", "true")]
    if cloud:
        return Login(None, f"{cloud[0]} is set: the cloud's credentials are not checked")
    home = home_dir(env)
    config_dir = dir_from(env, "CLAUDE_CONFIG_DIR", home / ".claude")
    secure_dir = dir_from(env, "CLAUDE_SECURESTORAGE_CONFIG_DIR", config_dir)
    credentials = secure_dir / ".credentials.json"
    if credentials.is_file():
        return Login(True, shown(credentials, env))
    global_config = (config_dir if env.get("CLAUDE_CONFIG_DIR") else home) / ".claude.json"
    if "primaryApiKey" in (json_object(global_config) or {}):
        return Login(True, f"an API key saved by /login ({shown(global_config, env)})")
    settings = config_dir / "settings.json"
    if "apiKeyHelper" in (json_object(settings) or {}):
        return Login(True, f"apiKeyHelper ({shown(settings, env)})")
    if sys.platform == "darwin":
        return Login(None, "a login in the macOS keychain is not checked")
    return Login(False, hint)


# -- gemini ---------------------------------------------------------------------------------

def gemini_login(env: Mapping[str, str], cwd: Path, hint: str) -> Login:
    """The auth type in settings.json (`security.auth.selectedType`, the project's over
    $GEMINI_CLI_HOME/.gemini's), else the one the environment implies, as gemini decides it;
    then what that type needs: GEMINI_API_KEY (environment or the .env file gemini loads; a
    key saved by gemini itself sits in the OS keychain or .gemini/gemini-credentials.json), a
    Google login in .gemini/oauth_creds.json (gemini-credentials.json with
    GEMINI_FORCE_ENCRYPTED_FILE_STORAGE=true), Vertex AI's project and location or
    GOOGLE_API_KEY. No type at all: gemini refuses to start (exit 41)."""
    home = dir_from(env, "GEMINI_CLI_HOME", home_dir(env))
    merged = {**_dotenv_names(_gemini_env_file(cwd, home)), **env}
    auth_type = _gemini_auth_type(cwd, home) or _gemini_env_auth_type(merged)
    gemini_dir = home / ".gemini"
    if auth_type is None:
        return Login(False, f"no auth method: {hint}")
    if auth_type == "gemini-api-key":
        if set_names(merged, ["GEMINI_API_KEY"]):
            return Login(True, "GEMINI_API_KEY (environment or .env)")
        saved = gemini_dir / "gemini-credentials.json"
        if saved.is_file():
            return Login(True, shown(saved, env))
        return Login(None, "GEMINI_API_KEY is not set; a key gemini saved in the OS keychain "
                           "is not checked")
    if auth_type == "oauth-personal":
        # the encrypted file only with GEMINI_FORCE_ENCRYPTED_FILE_STORAGE (it also keeps keys)
        encrypted = merged.get("GEMINI_FORCE_ENCRYPTED_FILE_STORAGE") == "true"
        creds = gemini_dir / ("gemini-credentials.json" if encrypted else "oauth_creds.json")
        return Login(True, shown(creds, env)) if creds.is_file() else Login(False, hint)
    if auth_type == "vertex-ai":
        project = set_names(merged, ["GOOGLE_CLOUD_PROJECT", "GOOGLE_CLOUD_LOCATION"])
        names = set_names(merged, ["GOOGLE_API_KEY"]) or (project if len(project) == 2 else [])
        if names:
            return Login(True, _env_found(names))
        return Login(False, "set GOOGLE_CLOUD_PROJECT and GOOGLE_CLOUD_LOCATION, or "
                            "GOOGLE_API_KEY (Vertex AI)")
    return Login(None, f"auth type '{auth_type}': not checked")


def _gemini_auth_type(cwd: Path, home: Path) -> str | None:
    """security.auth.selectedType from the settings files (the project's wins)."""
    found = None
    for path in (home / ".gemini" / "settings.json", cwd / ".gemini" / "settings.json"):
        selected = _table(json_object(path), "security", "auth").get("selectedType")
        if isinstance(selected, str) and selected:
            found = selected
    return found


def _gemini_env_auth_type(env: Mapping[str, str]) -> str | None:
    """The auth type gemini takes from its environment when settings.json names none."""
    if env.get("GOOGLE_GENAI_USE_GCA") == "true":
        return "oauth-personal"
    if env.get("GOOGLE_GENAI_USE_VERTEXAI") == "true":
        return "vertex-ai"
    if env.get("GOOGLE_GEMINI_BASE_URL"):
        return "gateway"
    if env.get("GEMINI_API_KEY"):
        return "gemini-api-key"
    if env.get("CLOUD_SHELL") == "true" or env.get("GEMINI_CLI_USE_COMPUTE_ADC") == "true":
        return "compute-default-credentials"
    return None


def _gemini_env_file(cwd: Path, home: Path) -> Path | None:
    """The .env file gemini loads: .gemini/.env or .env from the project up, then HOME's."""
    for directory in (cwd.resolve(), *cwd.resolve().parents):
        for path in (directory / ".gemini" / ".env", directory / ".env"):
            if path.is_file():
                return path
    return next((path for path in (home / ".gemini" / ".env", home / ".env")
                 if path.is_file()), None)


def _dotenv_names(path: Path | None) -> dict[str, str]:
    """The names a .env file sets (each mapped to "set": their values are never read out)."""
    try:
        text = path.read_text(encoding="utf-8") if path is not None else ""
    except OSError:
        return {}
    return dict.fromkeys(_DOTENV_NAME.findall(text), "set")


# -- opencode -------------------------------------------------------------------------------

def opencode_login(env: Mapping[str, str], cwd: Path, model: str | None, hint: str) -> Login:
    """The provider of the model (the agent's `model`, else opencode's config `model`):
    credentials saved by `opencode auth login` ($XDG_DATA_HOME/opencode/auth.json, keyed by
    provider), an `apiKey` in the provider's config (OPENCODE_CONFIG_CONTENT, opencode.json
    in the project or $XDG_CONFIG_HOME/opencode), or the provider's environment variable.
    Without a model: any saved provider or known variable."""
    configs = _opencode_configs(env, cwd)
    model = model or next((str(c["model"]) for c in configs if c.get("model")), None)
    data_home = dir_from(env, "XDG_DATA_HOME", home_dir(env) / ".local" / "share")
    auth_path = data_home / "opencode" / "auth.json"
    saved = sorted(json_object(auth_path) or {})
    if model is None or "/" not in model:
        known = set_names(env, [name for names in OPENCODE_PROVIDER_ENV.values()
                                for name in names])
        if saved:
            return Login(True, f"{', '.join(saved)} in {shown(auth_path, env)}")
        if known:
            return Login(True, _env_found(known))
        return Login(None, "no model set: which provider it needs is not known")
    provider = model.split("/", 1)[0]
    if provider in saved:
        return Login(True, f"{provider} in {shown(auth_path, env)}")
    configured = _opencode_config_key(configs, provider, env)
    if configured is not None:
        return Login(True, configured)
    names = OPENCODE_PROVIDER_ENV.get(provider, (f"{provider.upper().replace('-', '_')}_API_KEY",))
    if set_names(env, names):
        return Login(True, _env_found(set_names(env, names)))
    if provider == "opencode" or any(_table(c, "provider", provider) for c in configs):
        # opencode's own free models, and a provider of the config's own (a local server
        # may take no key at all), may well run without one.
        return Login(None, f"provider '{provider}' has no key set: it may need none")
    return Login(False, f"no credentials for provider '{provider}': {hint}")


def _opencode_configs(env: Mapping[str, str], cwd: Path) -> list[dict[str, Any]]:
    """opencode's configs, the one that wins first: OPENCODE_CONFIG_CONTENT, the project's
    opencode.json(c), the global one (JSON with comments is skipped: not parsed here)."""
    configs: list[dict[str, Any]] = []
    content = env.get("OPENCODE_CONFIG_CONTENT")
    if content:
        try:
            parsed = json.loads(content)
        except ValueError:
            parsed = None
        if isinstance(parsed, dict):
            configs.append(parsed)
    global_dir = dir_from(env, "XDG_CONFIG_HOME", home_dir(env) / ".config") / "opencode"
    for directory in (cwd, global_dir):
        for name in ("opencode.json", "opencode.jsonc"):
            parsed = json_object(directory / name)
            if parsed is not None:
                configs.append(parsed)
    return configs


def _opencode_config_key(configs: list[dict[str, Any]], provider: str,
                         env: Mapping[str, str]) -> str | None:
    """Where a config gives the provider its key (`options.apiKey`), if one does."""
    for config in configs:
        key = _table(config, "provider", provider, "options").get("apiKey")
        if not isinstance(key, str) or not key:
            continue
        ref = _ENV_REF.match(key)
        if ref is None:
            return f"apiKey of provider '{provider}' in opencode's config"
        if set_names(env, [ref.group(1)]):
            return _env_found([ref.group(1)])
    return None
