"""Harbor 0.25's own docker environment, driving docker-compose 1.29 instead of Compose V2.

Used only by scripts/check-harbor-export, which runs Harbor's `oracle` and `nop` agents on an
exported akbench task here, where only docker-compose 1.29 (Debian bookworm's, also PyPI's)
can be installed: Harbor's `docker` environment calls `docker compose` (the V2 CLI plugin).

Harbor itself separates the orchestration from the compose dialect: `DockerEnvironment`
(start, exec, upload, download, stop; the oracle agent, the verifier and the reward reading
on top) asks `runtime()` for the commands and three dialect flags, and its Podman
environment swaps only that (podman-compose 1.x: no `up --wait`, no `compose cp`, no
`--project-directory`). This class does exactly the same for docker-compose 1.29, which has
the same three gaps, so Harbor's own fallbacks run: readiness by polling `exec true` instead
of `up --wait`, uploads through `exec tar -x` and downloads through `docker cp` instead of
`compose cp`, the task's compose file first instead of `--project-directory`.

One translation is added: Compose V2's `exec` allocates a terminal only when its stdin is
one (Harbor's never is), docker-compose 1.29's always does unless given `-T` (and fails
"the input device is not a TTY"); so an `exec` without `-T` gets `-T`, and V2's long
spelling `--no-TTY` is written `-T`. Nothing else of Harbor is replaced.

Sidecar services need no translation: docker-compose 1.29 reads a compose file without
`version:` (Harbor's and the examples') as the Compose Specification, keeps `depends_on:
condition: service_healthy`, and creates the dependent service only once the dependency's
healthcheck passes (checked by hand: `main` started 0.5 s after the first passing check of
a service that becomes healthy after 8 s), as `docker compose up` does.

Load it with `harbor run -e harbor_compose1:Compose1DockerEnvironment` and this folder on
PYTHONPATH.
"""

from __future__ import annotations

import functools
import shutil

from harbor.environments.docker.docker import DockerEnvironment
from harbor.environments.docker.runtime import ContainerRuntime


class Compose1DockerEnvironment(DockerEnvironment):
    """`DockerEnvironment` whose compose frontend is `docker-compose` 1.x."""

    @classmethod
    @functools.cache
    def runtime(cls) -> ContainerRuntime:
        return ContainerRuntime(
            engine=("docker",),
            compose=("docker-compose",),
            supports_compose_wait=False,
            supports_compose_cp=False,
            supports_compose_project_directory=False,
        )

    @classmethod
    def preflight(cls) -> None:
        if not shutil.which("docker-compose"):
            raise SystemExit(
                "harbor_compose1: failed to find docker-compose on PATH; "
                "fix: apt-get install docker-compose (1.29)"
            )
        super().preflight()

    async def _run_docker_compose_command(self, command: list[str], *args, **kwargs):
        return await super()._run_docker_compose_command(
            compose1_command(command), *args, **kwargs
        )


def compose1_command(command: list[str]) -> list[str]:
    """A Compose V2 subcommand as docker-compose 1.29 means it (see the module doc)."""
    if not command or command[0] != "exec":
        return command
    rest = ["-T" if a == "--no-TTY" else a for a in command[1:]]
    if "-T" not in rest:
        rest.insert(0, "-T")
    return ["exec", *rest]
