"""Harbor's Docker environment, enforcing network_mode = "no-network" without Docker Hub.

Harbor 0.25.0's DockerEnvironment enforces it only with its egress control: a probe that runs
alpine@sha256:... turns it on, and its sidecar is built FROM gogost/gost@sha256:..., both from
Docker Hub (harbor/environments/docker/docker.py); where they cannot be pulled the probe fails,
the egress control stays off, and BaseEnvironment refuses the task. Here, where it is off, no-network is
enforced with Harbor's own docker-compose-no-network.yaml (network_mode: none on main), as its
Compose-on-a-VM environments (ec2, langsmith, blaxel, vercel) do, and checked after start:
a trial whose container has a network interface other than loopback fails.

Written by `r2e export --format harbor` as harbor/r2e_harbor_env.py. Where Docker Hub cannot
be reached:

    PYTHONPATH=harbor harbor run -p tasks --agent oracle --env r2e_harbor_env:NoNetworkDocker

Where it can, Harbor's own egress control runs and this class adds nothing.
"""

from harbor.environments.docker import COMPOSE_NO_NETWORK_PATH
from harbor.environments.docker.docker import DockerEnvironment


class NoNetworkDocker(DockerEnvironment):
    @property
    def _network_none(self) -> bool:
        return self._network_disabled and not self._enable_egress_control

    @property
    def capabilities(self):
        return super().capabilities.model_copy(update={"disable_internet": True})

    @property
    def _docker_compose_paths(self):
        paths = super()._docker_compose_paths
        if self._network_none:
            paths.append(COMPOSE_NO_NETWORK_PATH)
        return paths

    async def start(self, force_build: bool):
        await super().start(force_build)
        if self._network_none:
            result = await self.exec("ls /sys/class/net")
            names = (result.stdout or "").split()
            if result.return_code != 0 or names != ["lo"]:
                raise RuntimeError(
                    f"network_mode 'no-network' is not in force: interfaces {names}, {result}"
                )
