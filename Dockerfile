# The proofgate GitHub Action (SPEC §6). GitHub builds this file when a workflow uses the
# action; it then runs it with the Docker socket mounted and /github/workspace as the
# working directory. No USER: container actions must run as the image's default user.
#
# Where no registry is reachable, build on a locally made Debian base and a wheelhouse
# (scripts/build-action-image does both):
#   docker build --build-arg BASE_IMAGE=proofgate/cleanroom:latest \
#                --build-arg WHEELHOUSE=1 -t proofgate/action .
#
# The default base is Debian 12 (Python 3.11, as the lock file's wheels), pinned by digest.
# Bump it deliberately, like a dependency: `docker buildx imagetools inspect
# debian:bookworm-slim` gives the current index digest.
ARG BASE_IMAGE=debian:bookworm-slim@sha256:7802002798b0e351323ed2357ae6dc5a8c4d0a05a57e7f4d8f97136151d3d603
FROM ${BASE_IMAGE}

# 1 = install from the wheels copied from .wheelhouse/ (no index); empty = from PyPI.
ARG WHEELHOUSE=""

# git fetches the pull request into a private bare repository; python3-venv isolates us.
RUN if ! command -v git >/dev/null 2>&1 || ! python3 -c 'import ensurepip, venv' 2>/dev/null; then \
      apt-get update -qq \
      && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends \
           ca-certificates git python3 python3-venv \
      && rm -rf /var/lib/apt/lists/*; \
    fi

# The glob lets the build work without a wheelhouse (it then matches nothing).
COPY requirements/action.lock .wheelhous[e] /opt/proofgate-build/
RUN python3 -m venv /opt/proofgate \
    && if [ -n "$WHEELHOUSE" ]; then set -- --no-index --find-links /opt/proofgate-build; fi \
    && /opt/proofgate/bin/pip install --quiet --no-cache-dir --disable-pip-version-check \
         --require-hashes --no-deps "$@" -r /opt/proofgate-build/action.lock \
    && rm -rf /opt/proofgate-build

# The package itself: its source on the venv's path (no build backend to fetch unhashed).
COPY pyproject.toml /opt/proofgate-src/
COPY gate /opt/proofgate-src/gate
RUN /opt/proofgate/bin/python -c 'import sysconfig; print(sysconfig.get_path("purelib"))' \
      | xargs -I{} sh -c 'echo /opt/proofgate-src > {}/proofgate.pth' \
    && /opt/proofgate/bin/python -c 'import gate.faces.action, gate.proof.prove, pygit2, docker, github' \
    && /opt/proofgate/bin/python -m compileall -q /opt/proofgate-src/gate
# (every module's bytecode, also of those imported only when a check runs: the Action
# runs with PYTHONDONTWRITEBYTECODE, so what is not compiled here is compiled every run)

ENV PATH=/opt/proofgate/bin:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin \
    PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1
ENTRYPOINT ["python", "-m", "gate.faces.action"]
