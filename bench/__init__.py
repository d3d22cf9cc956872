"""Benchmark scripts (``python -m bench.NAME``); each writes its section of ``docs/bench.md``.

``AVX2_KERNELS=1 python -m bench.NAME`` runs PyTorch's CPU kernels (ATen, oneDNN, MKL, FBGEMM) on AVX2 only, as on
a CPU without AVX-512: the settings below are made before torch is first imported.
"""

import os

AVX2_CAPS = {"ATEN_CPU_CAPABILITY": "avx2", "ONEDNN_MAX_CPU_ISA": "AVX2", "MKL_ENABLE_INSTRUCTIONS": "AVX2",
             "FBGEMM_ENABLE_INSTRUCTIONS": "AVX2"}

if os.environ.get("AVX2_KERNELS") == "1":
    os.environ.update(AVX2_CAPS)
