"""Configuration: YAML bytes -> `Config` (SPEC §2).

Checked against the shipped JSON Schema first (`gate/schema/proofgate.schema.json`), for
precise key-path messages, then built into frozen dataclasses. Pure: the caller reads the
bytes (from the base commit's tree, or a file the operator trusts) and names their source.

YAML hardening: the document must be one mapping; duplicate keys, aliases/anchors and
non-string keys are refused (a duplicated `checks:` key would silently replace the first
in a plain YAML load, and aliases can expand exponentially); size is capped.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Iterable, Mapping, Sequence
from functools import cache
from importlib import resources
from typing import TYPE_CHECKING, cast

from gate.differential import junitpath
from gate.differential.tarprotect import PROTECTED_UID
from gate.errors import ConfigError
from gate.model import (
    PHASE_ORDER,
    Budgets,
    CheckSpec,
    Command,
    Config,
    Decision,
    DifferentialMode,
    Limits,
    PolicySpec,
)
from gate.policy.paths import glob_problem

if TYPE_CHECKING:
    import yaml

    from gate.util.jsonschema_fast import Draft202012Validator, ValidationError

DEFAULT_CONFIG_PATH = ".github/proofgate.yml"
DEFAULT_IMAGE = "python:3.12-slim"
MAX_CONFIG_BYTES = 256 * 1024

_LIMIT_KEYS = ("timeout", "network", "memory", "cpus", "pids", "user", "cap_add", "env", "egress")
_UNITS = {"b": 1, "k": 1024, "m": 1024**2, "g": 1024**3}


@cache
def schema() -> Mapping[str, object]:
    """The JSON Schema shipped with the package."""
    text = resources.files("gate").joinpath("schema/proofgate.schema.json").read_text("utf-8")
    return cast(Mapping[str, object], json.loads(text))


@cache
def schema_digest() -> str:
    """SHA-256 of the shipped schema: what a remembered schema check was made against."""
    text = resources.files("gate").joinpath("schema/proofgate.schema.json").read_bytes()
    return hashlib.sha256(text).hexdigest()


@cache
def _validator() -> Draft202012Validator:
    # Imported here: a proof without a configuration never pays for jsonschema.
    from gate.util.jsonschema_fast import Draft202012Validator

    return Draft202012Validator(schema())


@cache
def _strict_loader() -> type[yaml.SafeLoader]:
    """SafeLoader that refuses duplicate keys, aliases and non-string keys. Built here, so
    a process that finds its configuration already checked never imports yaml."""
    import yaml

    class _StrictLoader(yaml.SafeLoader):
        pass

    _StrictLoader.add_constructor(
        yaml.resolver.BaseResolver.DEFAULT_MAPPING_TAG,
        _construct_mapping,
    )
    return _StrictLoader


def _construct_mapping(loader: yaml.SafeLoader, node: yaml.MappingNode) -> dict[object, object]:
    import yaml

    seen: set[object] = set()
    for key_node, _ in node.value:
        key = loader.construct_object(key_node, deep=True)
        if not isinstance(key, str):
            raise yaml.constructor.ConstructorError(
                None, None, f"non-string key {key!r}", key_node.start_mark
            )
        if key in seen:
            raise yaml.constructor.ConstructorError(
                None, None, f"duplicate key {key!r}", key_node.start_mark
            )
        seen.add(key)
    loader.flatten_mapping(node)
    return dict(loader.construct_pairs(node, deep=True))


def _key_path(path: Sequence[object]) -> str:
    out = ""
    for part in path:
        if isinstance(part, int):
            out += f"[{part}]"
        else:
            out += f".{part}" if out else str(part)
    return out or "(top level)"


def _show(value: object) -> str:
    text = json.dumps(value, ensure_ascii=False, default=str)
    return text if len(text) <= 80 else text[:77] + "..."


def _describe(error: ValidationError) -> tuple[str, str, str]:
    """(key path, expected, got) for the most useful of a schema error's causes."""
    # For oneOf/anyOf, prefer the branch that got furthest: it names the real problem.
    if error.context:
        deepest = max(error.context, key=lambda e: len(e.absolute_path))
        if len(deepest.absolute_path) > len(error.absolute_path):
            return _describe(deepest)
    path = list(error.absolute_path)
    got = _show(error.instance)
    kind = error.validator
    params = error.schema if isinstance(error.schema, Mapping) else {}
    if kind == "additionalProperties":
        allowed = sorted(cast(Mapping[str, object], params.get("properties", {})))
        extra = sorted(set(cast(Mapping[str, object], error.instance)) - set(allowed))
        key = extra[0] if extra else "?"
        return (
            _key_path([*path, key]),
            f"a known key ({', '.join(allowed)})" if allowed else "no such key",
            f"unknown key {key!r}",
        )
    if kind == "required":
        missing = str(error.message).split("'")[1] if "'" in error.message else "?"
        return _key_path([*path, missing]), "this required key", "nothing"
    if kind == "anyOf" and path and path[-2:-1] == ["checks"]:
        return _key_path(path), "a check with at least one phase (setup, build or test)", got
    if kind == "type":
        return _key_path(path), f"a value of type {error.validator_value}", got
    if kind in ("enum", "const"):
        options = cast(
            list[object], error.validator_value if kind == "enum" else [error.validator_value]
        )
        return _key_path(path), "one of " + ", ".join(_show(o) for o in options), got
    if kind == "pattern":
        what = str(params.get("description", f"a string matching {error.validator_value}"))
        return _key_path(path), what, got
    if kind in ("minimum", "exclusiveMinimum", "maximum", "exclusiveMaximum"):
        bound = {
            "minimum": "at least",
            "exclusiveMinimum": "more than",
            "maximum": "at most",
            "exclusiveMaximum": "less than",
        }[str(kind)]
        return _key_path(path), f"a number {bound} {error.validator_value}", got
    if kind in _SIZE_WORDS:
        return _key_path(path), _SIZE_WORDS[str(kind)].format(error.validator_value), got
    if kind == "uniqueItems":
        return _key_path(path), "no repeated items", got
    if kind == "oneOf":
        return _key_path(path), str(params.get("description", "a value allowed by the schema")), got
    if kind == "propertyNames":
        return _key_path(path), "environment variable names ([A-Za-z_][A-Za-z0-9_]*)", got
    return _key_path(path), str(error.message), got


_SIZE_WORDS = {
    "minItems": "at least {} item(s)",
    "maxItems": "at most {} items",
    "minLength": "a string of at least {} character(s)",
    "maxLength": "a string of at most {} characters",
    "maxProperties": "at most {} keys",
}


def _parse_yaml(data: bytes, source: str) -> object:
    if len(data) > MAX_CONFIG_BYTES:
        raise ConfigError(
            source, "", expected=f"at most {MAX_CONFIG_BYTES} bytes", got=f"{len(data)} bytes"
        )
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as e:
        raise ConfigError(source, "", expected="UTF-8 text", got=f"bad byte at {e.start}") from e
    import yaml

    try:
        for event in yaml.parse(text, Loader=yaml.SafeLoader):
            if isinstance(event, yaml.AliasEvent) or getattr(event, "anchor", None):
                raise ConfigError(
                    source, "", expected="YAML without anchors or aliases", got="an anchor/alias"
                )
        return yaml.load(text, Loader=_strict_loader())  # noqa: S506 - a SafeLoader subclass
    except yaml.YAMLError as e:
        mark = getattr(e, "problem_mark", None)
        where = f" at line {mark.line + 1}, column {mark.column + 1}" if mark else ""
        problem = getattr(e, "problem", None) or str(e).splitlines()[0]
        raise ConfigError(source, "", expected="valid YAML", got=f"{problem}{where}") from e
    except RecursionError as e:
        raise ConfigError(source, "", expected="valid YAML", got="nesting too deep") from e


def parse_memory(text: str) -> int:
    m = re.fullmatch(r"([0-9]+)([bkmgBKMG]?)", text)
    if m is None:
        raise ValueError(text)
    return int(m.group(1)) * _UNITS[(m.group(2) or "b").lower()]


def _command(raw: object) -> Command:
    if isinstance(raw, str):
        return Command.shell(raw)
    return Command(argv=tuple(cast(list[str], raw)))


def _phase(raw: object) -> tuple[Command, ...]:
    # A phase is one command (a string) or a list of commands (strings or argv lists).
    if isinstance(raw, str):
        return (Command.shell(raw),)
    return tuple(_command(c) for c in cast(list[object], raw))


def _limits(merged: Mapping[str, object]) -> Limits:
    base = Limits()
    user = merged.get("user", base.user)
    return Limits(
        timeout=int(cast(int, merged.get("timeout", base.timeout))),
        network=str(merged.get("network", base.network)),
        memory=parse_memory(str(merged["memory"])) if "memory" in merged else base.memory,
        cpus=float(cast(float, merged.get("cpus", base.cpus))),
        pids=int(cast(int, merged.get("pids", base.pids))),
        user=None if user is None else str(user),
        cap_add=tuple(str(c) for c in cast(list[object], merged.get("cap_add", []))),
        env=tuple(sorted(cast(Mapping[str, str], merged.get("env", {})).items())),
        egress=expand_egress(str(e) for e in cast(list[object], merged.get("egress", []))),
    )


PYTHON_PACKAGE_INDEX = "python-package-index"


def expand_egress(entries: Iterable[str]) -> tuple[str, ...]:
    """`egress` with the `python-package-index` alias replaced by the hosts of pip's own
    default index and its file storage, port 443, read from the pip installed beside
    proofgate (so no configuration has to spell them, and they follow pip). Order kept,
    duplicates dropped.

    Raises:
        ValueError: the alias is used and no pip is importable here.
    """
    out: list[str] = []
    for entry in entries:
        if entry == PYTHON_PACKAGE_INDEX:
            out += [f"{host}:443" for host in _pip_index_hosts()]
        else:
            out.append(entry)
    return tuple(dict.fromkeys(out))


def _pip_index_hosts() -> tuple[str, str]:
    try:
        from pip._internal.models.index import PyPI
    except ImportError as e:
        raise ValueError(
            f"`{PYTHON_PACKAGE_INDEX}` names pip's default index, and no pip is installed "
            "beside proofgate; list the index's host:port pairs instead"
        ) from e
    return str(PyPI.netloc), str(PyPI.file_storage_domain)


def _check_egress(source: str, doc: Mapping[str, object]) -> None:
    """Each `egress` entry is an exact `host:port` (SPEC §2); errors name the key."""
    places: list[tuple[str, object]] = [("defaults", doc.get("defaults", {}))]
    places += [(f"checks[{i}]", c) for i, c in enumerate(cast(list[object], doc["checks"]))]
    for where, raw in places:
        entries = cast(Mapping[str, object], raw).get("egress", [])
        for j, entry in enumerate(cast(list[str], entries)):
            try:
                if entry == PYTHON_PACKAGE_INDEX:
                    _pip_index_hosts()
                    continue
                # The broker file is stdlib-only and pure outside its `main`: the parser
                # the broker matches with validates the configuration, so the two cannot
                # disagree. Imported here: a configuration without `egress` never loads
                # the sandbox package.
                from gate.sandbox.egress_broker import parse_entry as parse_egress_entry

                parse_egress_entry(entry)
            except ValueError as e:
                raise ConfigError(
                    source, f"{where}.egress[{j}]", expected=str(e), got=_show(entry)
                ) from e


def _check_user(source: str, doc: Mapping[str, object]) -> None:
    """`user` never names proofgate's own uid or gid, which owns what a check may read
    but not change (the witness, a differential's trusted files:
    gate/differential/tarprotect.py)."""
    places: list[tuple[str, object]] = [("defaults", doc.get("defaults", {}))]
    places += [(f"checks[{i}]", c) for i, c in enumerate(cast(list[object], doc["checks"]))]
    for where, raw in places:
        user = cast(Mapping[str, object], raw).get("user")
        if user is None:
            continue
        ids = str(user).split(":")
        if any(part.isdigit() and int(part) == PROTECTED_UID for part in ids):
            raise ConfigError(
                source,
                f"{where}.user",
                expected=f"a user and group other than {PROTECTED_UID} (proofgate's own: it "
                "owns the files a check may read but not change)",
                got=_show(user),
            )


def _differential(
    raw: Mapping[str, object], has_junit: bool, source: str, i: int
) -> tuple[tuple[str, ...], DifferentialMode]:
    """`checks[i].tests` and `checks[i].differential` (SPEC §3.1), schema-checked already."""
    tests = tuple(cast(list[str], raw.get("tests", [])))
    for k, pattern in enumerate(tests):
        problem = glob_problem(pattern)
        if problem is not None:
            raise ConfigError(
                source,
                f"checks[{i}].tests[{k}]",
                expected=f"a glob ({problem})",
                got=_show(pattern),
            )
    default = DifferentialMode.TRUSTED if has_junit else DifferentialMode.OFF
    given = raw.get("differential", default.value)
    mode = DifferentialMode.OFF if given is False else DifferentialMode(str(given))
    if mode is not DifferentialMode.OFF and not has_junit:
        raise ConfigError(
            source,
            f"checks[{i}].differential",
            expected="off, or a `junit` report on the check (the differential compares it)",
            got=_show(mode.value),
        )
    return tests, mode


def checked_document(data: bytes, source: str) -> Mapping[str, object]:
    """The configuration's YAML document, checked against the schema (`schema_digest()`).

    Raises:
        ConfigError: too large, not UTF-8, not strict YAML, not a mapping, or not what
            the schema allows; the message names `source` and the key path.
    """
    doc = _parse_yaml(data, source)
    if not isinstance(doc, dict):
        raise ConfigError(source, "", expected="a mapping at the top level", got=_show(doc))
    errors = sorted(
        _validator().iter_errors(doc),
        key=lambda e: (
            list(map(str, e.absolute_path)),
            e.validator != "additionalProperties",  # a typo explains a "missing" key
            e.message,
        ),
    )
    if errors:
        key_path, expected, got = _describe(errors[0])
        raise ConfigError(source, key_path, expected=expected, got=got)
    return cast(Mapping[str, object], doc)


def _ci_default_token(doc: Mapping[str, object]) -> str:
    """`ci.default-token` (SPEC §2.1; the schema allows read | write), default read."""
    ci = doc.get("ci", {})
    return str(ci.get("default-token", "read")) if isinstance(ci, Mapping) else "read"


def load_config(
    data: bytes,
    *,
    source: str,
    known_rules: frozenset[str] | None = None,
    document: Mapping[str, object] | None = None,
) -> Config:
    """Parse and validate configuration bytes.

    Args:
        data: the file's exact bytes.
        source: how to name the file in messages (e.g. `.github/proofgate.yml@<base>`).
        known_rules: built-in policy rule ids; an unknown id in `policy.rules` is an error.
        document: what `checked_document(data, ...)` returned for these exact bytes
            before (the caller remembers it): YAML and the schema are then skipped, so
            the process imports neither; every other check still runs.

    Raises:
        ConfigError: malformed YAML, unknown keys, wrong types or bad values; the message
            names `source`, the key path, what was expected and what was found.
    """
    doc = checked_document(data, source) if document is None else document
    _check_egress(source, doc)
    _check_user(source, doc)
    defaults = cast(Mapping[str, object], doc.get("defaults", {}))
    checks: list[CheckSpec] = []
    names: set[str] = set()
    for i, raw in enumerate(cast(list[Mapping[str, object]], doc["checks"])):
        name = str(raw["name"])
        if name in names:
            raise ConfigError(
                source, f"checks[{i}].name", expected="a name unique among checks", got=_show(name)
            )
        names.add(name)
        merged = {
            k: raw[k] if k in raw else defaults[k] for k in _LIMIT_KEYS if k in raw or k in defaults
        }
        phases = tuple((p, _phase(raw[p.value])) for p in PHASE_ORDER if p.value in raw)
        junit = raw.get("junit")
        if junit is not None:
            try:  # SPEC §3.2: the report must be written inside /workspace
                junitpath.normalize(str(junit))
            except ValueError as e:
                raise ConfigError(
                    source,
                    f"checks[{i}].junit",
                    expected="a relative path inside /workspace",
                    got=f"{_show(junit)} ({e})",
                ) from None
        tests, mode = _differential(raw, junit is not None, source, i)
        inputs = raw.get("setup_inputs")
        for k, pattern in enumerate(cast(list[str], inputs or [])):
            problem = glob_problem(pattern)
            if problem is not None:
                where = f"checks[{i}].setup_inputs[{k}]"
                raise ConfigError(source, where, expected=f"a glob ({problem})", got=_show(pattern))
        checks.append(
            CheckSpec(
                name=name,
                phases=phases,
                limits=_limits(merged),
                junit=None if junit is None else str(junit),
                tests=tests,
                differential=mode,
                setup_inputs=None if inputs is None else tuple(cast(list[str], inputs)),
            )
        )

    policy_raw = cast(Mapping[str, object], doc.get("policy", {}))
    rules_raw = cast(Mapping[str, str], policy_raw.get("rules", {}))
    if known_rules is not None:
        for rule in sorted(rules_raw):
            if rule not in known_rules:
                raise ConfigError(
                    source,
                    f"policy.rules.{rule}",
                    expected="a built-in rule id (" + ", ".join(sorted(known_rules)) + ")",
                    got=_show(rule),
                )
    for key in ("protected", "deny"):
        for i, pattern in enumerate(cast(list[str], policy_raw.get(key, []))):
            problem = glob_problem(pattern)
            if problem is not None:
                raise ConfigError(
                    source, f"policy.{key}[{i}]", expected=f"a glob ({problem})", got=_show(pattern)
                )
    budgets_raw = cast(Mapping[str, int], policy_raw.get("budgets", {}))
    thresholds_raw = cast(Mapping[str, int], policy_raw.get("thresholds", {}))
    policy = PolicySpec(
        protected=tuple(cast(list[str], policy_raw.get("protected", []))),
        deny=tuple(cast(list[str], policy_raw.get("deny", []))),
        budgets=Budgets(files=budgets_raw.get("files"), lines=budgets_raw.get("lines")),
        rules=tuple(sorted((k, Decision(v.upper())) for k, v in rules_raw.items())),
        thresholds=(thresholds_raw.get("immediate"), thresholds_raw.get("future")),
        egress=tuple((c.name, c.limits.egress) for c in checks if c.limits.egress),
        commands=tuple(" ".join(cmd.argv) for c in checks for _, cmds in c.phases for cmd in cmds),
        ci_default_token_write=_ci_default_token(doc) == "write",
    )
    return Config(
        version=1,
        image=str(doc.get("image", DEFAULT_IMAGE)),
        checks=tuple(checks),
        policy=policy,
    )
