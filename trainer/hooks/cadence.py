"""When a step-cadenced hook acts: each time the global step reaches or passes a multiple of
``every``, once, also when a train_op moves the step by more than one."""

from typing import Optional


class StepCadence:
    def __init__(self, every: Optional[int]):
        self.every = int(every or 0)
        self._next: Optional[int] = None

    def start(self, step: int) -> None:
        """The session begins at ``step``: the next multiple of ``every`` above it is due."""
        self._next = (step // self.every + 1) * self.every if self.every else None

    def would_be_due(self, step: int) -> bool:
        """Whether :meth:`due` would be True for ``step`` (nothing is consumed)."""
        return bool(self.every) and (self._next is None or step >= self._next)

    def due(self, step: int) -> bool:
        """True (once) when ``step`` has reached the next multiple of ``every``."""
        if not self.every:
            return False
        if self._next is None:
            self.start(step - 1)
        if step < self._next:
            return False
        self._next = (step // self.every + 1) * self.every
        return True
