"""Benchmark data for vision_cuts, shipped as ``vision_cuts.datasets``.

* ``synthetic``: problems generated in code (segmentation energies, random grids).
* ``grabcut``: loader and error measure of the GrabCut segmentation benchmark
  (``from vision_cuts.datasets import grabcut``); the files live under
  ``$VISION_CUTS_DATA/grabcut``.

Submodules are imported on demand: importing this package loads none of them.
"""
