"""Exception types raised by vision_cuts."""

from __future__ import annotations

__all__ = ["VisionCutsError", "BackendUnavailableError", "DeviceMemoryError",
           "NonSubmodularError"]


class VisionCutsError(Exception):
    """Base class of the errors that vision_cuts raises on its own account."""


class BackendUnavailableError(VisionCutsError, RuntimeError):
    """An explicitly requested backend cannot run on this machine.

    Raised, for example, for ``backend="gpu"`` when CuPy is not installed or no CUDA
    device is present. vision_cuts never falls back to another backend silently.
    """


class NonSubmodularError(VisionCutsError, ValueError):
    """A pairwise term violates ``B + C - A - D >= 0`` and cannot be cut exactly.

    Attributes
    ----------
    count : int
        Number of violating edges.
    first : tuple
        ``(direction, *index)`` of the first violating edge in C order.
    """

    def __init__(self, message: str, *, count: int = 0, first: tuple = ()) -> None:
        super().__init__(message)
        self.count = count
        self.first = first


class DeviceMemoryError(VisionCutsError, MemoryError):
    """A problem does not fit in the free memory of the GPU.

    The message names the problem's shape, the bytes it needs and the bytes free; the
    CPU backend (``backend="cpu"``) has no such limit beyond host memory.
    """
