"""The scripted provider of the kill points (K3): deterministic answers, counted calls."""

from __future__ import annotations

import hashlib
import math
from dataclasses import dataclass
from typing import Any, Protocol

__all__ = ["AgentResult", "ProviderEvents", "ScriptedProvider", "prompt_key"]


class ProviderEvents(Protocol):
    """Where the provider and the tool report what they did (K3)."""

    def call(self, prompt: str) -> None: ...
    def tool(self, target: str) -> None: ...


@dataclass
class ScriptedProvider:
    """The scripted model of K3: ``step one`` -> alpha, ``step two`` -> beta, else a tool.

    ``events`` hears every call and tool run before it happens (the worker
    writes them to its report; the referee counts them).
    """

    events: ProviderEvents | None = None
    calls: int = 0
    tool_runs: int = 0

    def complete(self, prompt: str, turn: int) -> dict[str, Any]:
        """Answer one turn: ``{"text"}`` or ``{"tool", "args"}``, plus usage."""
        if self.events is not None:
            self.events.call(prompt)
        self.calls += 1
        usage = {
            "inputTokens": max(1, math.ceil(len(prompt) / 4)),
            "outputTokens": 4,
            "cacheReadTokens": 0,
            "cacheWriteTokens": 0,
        }
        if "step one" in prompt:
            return {"text": "alpha", "usage": usage}
        if "step two" in prompt:
            return {"text": "beta", "usage": usage}
        return {"tool": "probe", "args": {"target": f"t{turn}"}, "usage": usage}

    def probe(self, target: str) -> str:
        """The ``probe`` tool: logs ``tool`` and returns its evidence."""
        if self.events is not None:
            self.events.tool(target)
        self.tool_runs += 1
        return f"evidence {target}"


@dataclass(frozen=True)
class AgentResult:
    """What one agent call produced: its status and value."""

    status: str
    value: Any


def prompt_key(prompt: str) -> str:
    """The deterministic content key of an agent call (K2)."""
    return hashlib.sha256(prompt.encode("utf-8")).hexdigest()
