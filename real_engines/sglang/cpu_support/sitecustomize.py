"""Loaded at interpreter start when this folder is on PYTHONPATH (test and demo support, not the product).

Two things SGLang 0.5.23 checks at start that this CPU support answers:

- The registry's torchvision is a CUDA build: on CPU torch its `_meta_registrations` import raises
  `operator torchvision::nms does not exist`. SGLang imports `torchvision.transforms` at start
  (`srt/multimodal/internvl_utils.py`, through `srt/configs/__init__.py`); its transforms are pure Python and
  need none of those ops, so an empty `torchvision._meta_registrations` lets them import.
- EAGLE-3 on CPU runs only through the `intel_amx` attention backend, which SGLang takes only where
  `cpu_has_amx_support()` (`srt/utils/common.py`): the CPU has AMX tiles (`torch.cpu._is_amx_tile_supported()`,
  read once into the module's `is_amx_tile_supported`) and the `sgl_kernel` CPU ops are registered. Here
  those ops are the pure-torch stand-ins of `sgl_kernel/`, which need no AMX instruction, so on a CPU
  without AMX (AMD EPYC, older Xeons) that module-level reading is set true once the module is loaded.
  Without it SGLang falls back to torch_native and EAGLE-3 refuses to start ("EAGLE is not supported in
  decode attention backend torch_native").
"""

import importlib.abc
import importlib.machinery
import sys
import types
from typing import Any

sys.modules.setdefault("torchvision._meta_registrations", types.ModuleType("torchvision._meta_registrations"))

AMX_MODULE = "sglang.srt.utils.common"


class AmxStandIn(importlib.abc.MetaPathFinder):
    """Finds `AMX_MODULE` as the path finder does and sets its `is_amx_tile_supported` after it runs."""

    def find_spec(self, name: str, path: Any, target: Any = None) -> Any:
        if name != AMX_MODULE:
            return None
        spec = importlib.machinery.PathFinder.find_spec(name, path)
        loader = getattr(spec, "loader", None)
        if loader is None:
            return spec
        run = loader.exec_module

        def exec_module(module: types.ModuleType) -> None:
            run(module)
            module.is_amx_tile_supported = True  # type: ignore[attr-defined]

        loader.exec_module = exec_module
        return spec


sys.meta_path.insert(0, AmxStandIn())
