"""vision_cuts: exact graph cuts and assignment for computer vision, on GPU and CPU."""

from __future__ import annotations

from ._backend import describe_backend, gpu_available
from .assignment import linear_sum_assignment, linear_sum_assignment_batched
from .dimacs import read_dimacs, write_dimacs
from .exceptions import (
    BackendUnavailableError,
    DeviceMemoryError,
    NonSubmodularError,
    VisionCutsError,
)
from .graph import (
    FlowGraph,
    MaxFlow,
    acyclic_dense_graph,
    ak_graph,
    flow_graph,
    flow_graph_from_sparse,
    genrmf_graph,
    maximum_flow,
    washington_rlg_graph,
)
from .grid import GridEnergy, grid_energy, grid_graph
from .matching import maximum_bipartite_matching
from .maxflow import MinCut, maxflow_grid
from .multilabel import LabelResult, label_energy, minimize_labels
from .optical_flow import FlowResult, optical_flow, optical_flow_frames
from .segmentation import GrabCutResult, grabcut, segment
from .stereo import stereo_disparity
from .visualize import draw_flow_arrows, flow_to_color

__version__ = "0.1.0"

__all__ = [
    "BackendUnavailableError",
    "DeviceMemoryError",
    "FlowGraph",
    "FlowResult",
    "GrabCutResult",
    "GridEnergy",
    "LabelResult",
    "MaxFlow",
    "MinCut",
    "NonSubmodularError",
    "VisionCutsError",
    "acyclic_dense_graph",
    "ak_graph",
    "describe_backend",
    "draw_flow_arrows",
    "flow_graph",
    "flow_graph_from_sparse",
    "flow_to_color",
    "genrmf_graph",
    "gpu_available",
    "grabcut",
    "grid_energy",
    "grid_graph",
    "label_energy",
    "linear_sum_assignment",
    "linear_sum_assignment_batched",
    "maxflow_grid",
    "maximum_bipartite_matching",
    "maximum_flow",
    "minimize_labels",
    "optical_flow",
    "optical_flow_frames",
    "read_dimacs",
    "segment",
    "stereo_disparity",
    "washington_rlg_graph",
    "write_dimacs",
]
