"""A shared budget's pot on Ray: the account lives in a Ray actor.

``on_ray(budget)`` moves the pot into a named-less detached-free actor
(it lives as long as the driver holds the budget); the budget then pickles
with the actor handle, so runs in Ray workers charge one account.  A run that
crosses a limit is stopped in its worker at once; runs in other workers learn
of it at their next charge (their next usage, turn or tool-call event) or when
they start (then nothing is started).
"""

from __future__ import annotations

from typing import Any

from coding_genesis._util.accounts import BudgetWarning, Exceeded, Totals, Usage
from coding_genesis.budget import Budget

__all__ = ["on_ray", "ray_account"]


class _BudgetActor:
    """The actor's body: one :class:`Totals`, touched by one call at a time."""

    def __init__(self, totals: Totals) -> None:
        self._totals = totals

    def charge(self, delta: Usage) -> tuple[Exceeded | None, list[BudgetWarning], bool]:
        return self._totals.charge(delta)

    def open(self, key: str) -> Exceeded | None:
        self._totals.open_runs.add(key)
        return self._totals.exceeded

    def close(self, key: str) -> None:
        self._totals.open_runs.discard(key)

    def snapshot(self) -> dict[str, Any]:
        return self._totals.snapshot()

    def exceeded(self) -> Exceeded | None:
        return self._totals.exceeded


class _RayAccount:
    """An account whose state is in a Ray actor (picklable: the handle is)."""

    def __init__(self, actor: Any) -> None:
        self._actor = actor

    def _get(self, ref: Any) -> Any:
        import ray

        return ray.get(ref)

    def charge(self, key: str, delta: Usage) -> tuple[Exceeded | None, list[BudgetWarning], bool]:
        result: tuple[Exceeded | None, list[BudgetWarning], bool] = self._get(
            self._actor.charge.remote(delta)
        )
        return result

    def open(self, key: str) -> Exceeded | None:
        found: Exceeded | None = self._get(self._actor.open.remote(key))
        return found

    def close(self, key: str) -> None:
        self._get(self._actor.close.remote(key))

    def snapshot(self) -> dict[str, Any]:
        snap: dict[str, Any] = self._get(self._actor.snapshot.remote())
        return snap

    def stopped_since(self, key: str) -> Exceeded | None:
        found: Exceeded | None = self._get(self._actor.exceeded.remote())
        return found


def ray_account(totals: Totals) -> _RayAccount:
    """A new Ray actor holding ``totals`` (Ray must be initialized)."""
    import ray

    actor_class = ray.remote(num_cpus=0)(_BudgetActor)
    return _RayAccount(actor_class.remote(totals))


def on_ray(budget: Budget) -> Budget:
    """``budget``'s shared pot moved into a Ray actor (``ray.init()`` first), so
    that runs in Ray workers charge one account.  Returns ``budget``."""
    return budget.move_pot(ray_account)
