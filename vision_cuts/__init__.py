"""vision_cuts: exact graph cuts and assignment for computer vision, on GPU and CPU."""

from __future__ import annotations

from ._backend import gpu_available
from .assignment import linear_sum_assignment, linear_sum_assignment_batched
from .exceptions import BackendUnavailableError, NonSubmodularError, VisionCutsError
from .grid import GridEnergy, grid_energy, grid_graph
from .maxflow import MinCut, maxflow_grid
from .segmentation import GrabCutResult, grabcut, segment
from .stereo import stereo_disparity

__version__ = "0.1.0"

__all__ = [
    "BackendUnavailableError",
    "GrabCutResult",
    "GridEnergy",
    "MinCut",
    "NonSubmodularError",
    "VisionCutsError",
    "gpu_available",
    "grabcut",
    "grid_energy",
    "grid_graph",
    "linear_sum_assignment",
    "linear_sum_assignment_batched",
    "maxflow_grid",
    "segment",
    "stereo_disparity",
]
