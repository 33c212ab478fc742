"""Start and stop the stand-in around a test; fail the test on any OpenAPI violation.

Test modules wrap these generators in their own fixtures (no conftest plugin needed):

    @pytest.fixture
    def standin() -> Iterator[GitHubStandIn]:
        yield from running_standin()
"""

from __future__ import annotations

from collections.abc import Iterator

from tests.github_standin.server import GitHubStandIn

REPO = "octo-org/widgets"
TOKEN = "test-token"


def running_standin(*, base_path: str = "") -> Iterator[GitHubStandIn]:
    server = GitHubStandIn(base_path=base_path, token=TOKEN).start()
    server.add_repo(REPO)
    try:
        yield server
    finally:
        server.stop()
    assert not server.violations, "GitHub stand-in saw OpenAPI violations:\n" + "\n".join(
        server.violations
    )
