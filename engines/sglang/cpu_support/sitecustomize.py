"""Loaded at interpreter start when this folder is on PYTHONPATH (test and demo support, not the product).

The registry's torchvision is a CUDA build: on CPU torch its `_meta_registrations` import raises
`operator torchvision::nms does not exist`. SGLang 0.5.23 imports `torchvision.transforms` at start
(`srt/multimodal/internvl_utils.py`, through `srt/configs/__init__.py`); its transforms are pure Python and
need none of those ops, so an empty `torchvision._meta_registrations` lets them import.
"""

import sys
import types

sys.modules.setdefault("torchvision._meta_registrations", types.ModuleType("torchvision._meta_registrations"))
