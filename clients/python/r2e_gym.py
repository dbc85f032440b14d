"""`R2EEnv`: the environment of `r2e serve` as a `gymnasium.Env`, with its spaces declared.

Needs gymnasium (1.x, with numpy); `r2e_client.py` beside it stays standard library only.

    import gymnasium, r2e_gym  # importing r2e_gym registers "r2e/R2E-v0"

    env = r2e_gym.R2EEnv("http://127.0.0.1:8080", max_steps=50)
    # or: env = gymnasium.make("r2e/R2E-v0", client="http://127.0.0.1:8080")
    obs, info = env.reset(seed=0)                       # or options={"instance": ID}
    obs, reward, terminated, truncated, info = env.step({"op": "write_function", "code": code})
    obs, reward, terminated, truncated, info = env.step({"op": "submit"})

The behaviour (reset, step, the outcome, truncation, errors) is `r2e_client.R2EEnvBase`'s; this
class adds the spaces and draws the instance with gymnasium's `np_random`.

Spaces:

- `observation_space`: a `Dict` of `Text` over the keys `r2e_client.OBS_KEYS`, each of 0 to
  `MAX_OBS_CHARS` characters of `OBS_CHARSET` (the Basic Multilingual Plane without control
  characters and surrogates, plus tab, newline and carriage return). Observations are fitted to
  it (`r2e_client.fit_text`: other characters escaped, overlong text cut); `info` holds the
  exact answers. The one `Text` is shared by every key and every environment of the process
  (its 63,000 characters take 11 MB and half a second to build).
- `action_space`: a `Dict` of `op` (`Discrete` over `r2e_client.OPS`), `path`, `text`,
  `command` and `code` (`Text` over printable ASCII, tab and newline). `step` takes any dict with
  an `op` and the fields that op uses (a sampled action carries them all), strings of any
  characters, and the op as its name or its index. A sampled action is harmless: a random path
  or command is an error observation, not an exception.
"""

from __future__ import annotations

import string
from typing import Any, Optional

import gymnasium
from gymnasium import spaces

from r2e_client import MAX_OBS_CHARS, OBS_KEYS, OPS, R2EEnvBase, obs_char_allowed

__all__ = ["R2EEnv", "ENV_ID", "OBS_CHARSET", "ACTION_CHARSET", "MAX_ACTION_CHARS", "MAX_COMMAND_CHARS"]

ENV_ID = "r2e/R2E-v0"
"""The id `gymnasium.make` knows the environment by (registered when this module is imported);
`make`'s keyword arguments are `R2EEnv`'s, `client` a URL or a `Client`."""

OBS_CHARSET = "".join(c for c in map(chr, range(0x10000)) if obs_char_allowed(c))
"""The characters an observation's strings are made of."""

ACTION_CHARSET = "".join(c for c in string.printable if c not in "\x0b\x0c")
"""The characters the action space's strings are sampled from (printable ASCII, tab, newline,
carriage return)."""

MAX_ACTION_CHARS = 1 << 20
"""The longest `text` or `code` of the action space (a file of the server's default
`max_file_bytes`)."""

MAX_COMMAND_CHARS = 1 << 16
"""The longest `command` of the action space (Linux refuses one argument over 128 KiB)."""

_OBS_TEXT: Optional[spaces.Text] = None


def _obs_text() -> spaces.Text:
    global _OBS_TEXT
    if _OBS_TEXT is None:
        _OBS_TEXT = spaces.Text(MAX_OBS_CHARS, min_length=0, charset=OBS_CHARSET)
    return _OBS_TEXT


class R2EEnv(R2EEnvBase, gymnasium.Env):
    """`r2e_client.R2EEnvBase` as a `gymnasium.Env`: `R2EEnv(client, max_steps=50,
    max_seconds=None, exec_timeout_s=10, raise_errors=False, render_mode=None)`, `client` a
    `Client` or the server's URL; `render_mode="ansi"` renders the last observation as text."""

    def __init__(self, client: Any, **kwargs: Any):
        R2EEnvBase.__init__(self, client, **kwargs)
        text = _obs_text()
        self.observation_space = spaces.Dict({k: text for k in OBS_KEYS})
        self.action_space = spaces.Dict(
            {
                "op": spaces.Discrete(len(OPS)),
                "path": spaces.Text(4096, charset=ACTION_CHARSET),
                "text": spaces.Text(MAX_ACTION_CHARS, min_length=0, charset=ACTION_CHARSET),
                "command": spaces.Text(MAX_COMMAND_CHARS, charset=ACTION_CHARSET),
                "code": spaces.Text(MAX_ACTION_CHARS, charset=ACTION_CHARSET),
            }
        )

    def _seed(self, seed: Optional[int]) -> None:
        gymnasium.Env.reset(self, seed=seed)

    def _choose(self, n: int) -> int:
        return int(self.np_random.integers(n))


if ENV_ID not in gymnasium.registry:
    gymnasium.register(id=ENV_ID, entry_point="r2e_gym:R2EEnv")
