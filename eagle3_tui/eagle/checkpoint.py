"""A draft checkpoint's names, dtypes and shapes, checked against what SGLang's `llama_eagle3` loads.

The safetensors header is read by hand (8-byte little-endian length, then JSON), so a check of a
70 GB sharded draft reads a few kilobytes and needs no torch. SGLang's loader skips names it does
not know without a word (the parameter stays random, accept length ~1), so every mismatch is
spelled out here (research/sglang.md §4.2–4.3, research/eagle3_formats.md §1.4, §4.2).

Stdlib only: it ships in the check's zip (eagle/shipped.py).
"""

from __future__ import annotations

import json
import os
import re
import struct
import warnings
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

from eagle3_tui.eagle.trainers import SGLANG_0_5_6, ServedLoader
from eagle3_tui.errors import UserError
from eagle3_tui.formats.readers import json_object


class BadInput(UserError):
    """A file that is not what the check needs; the message is one sentence naming it."""


IssueKind = Literal["unknown", "missing", "shape", "fc-width", "d2t-range", "ignored-norm", "architecture",
                    "embedding", "aux-config", "layers"]
MLA_DRAFT = "Eagle3DeepseekV2ForCausalLM"
"""SGLang's MLA EAGLE-3 draft (`kimi_k25_eagle3.py`, 0.5.12+): DeepSeek-V2 attention, the EAGLE-3 rest."""
# the attention tensors of an MLA layer (`DeepseekV2AttentionMLA`), checked by name only
MLA_ATTENTION = ("q_a_proj", "q_a_layernorm", "q_b_proj", "q_proj", "kv_a_proj_with_mqa", "kv_a_layernorm",
                 "kv_b_proj", "o_proj")
_LLAMA_ATTENTION = ("q_proj", "k_proj", "v_proj", "o_proj")

# safetensors dtype names and their sizes in bytes
DTYPE_SIZES: dict[str, int] = {
    "F64": 8, "F32": 4, "F16": 2, "BF16": 2, "F8_E4M3": 1, "F8_E5M2": 1,
    "I64": 8, "I32": 4, "I16": 2, "I8": 1, "U8": 1, "U16": 2, "U32": 4, "U64": 8, "BOOL": 1,
}
_MAX_HEADER = 100 * 1024 * 1024


@dataclass(frozen=True)
class TensorInfo:
    dtype: str
    shape: tuple[int, ...]
    file: str
    begin: int = 0  # absolute byte offsets in `file`
    end: int = 0


@dataclass
class CheckpointHeader:
    config: dict
    tensors: dict[str, TensorInfo]
    draft_dir: str = ""
    config_path: str = ""
    files: list[str] = field(default_factory=list)


@dataclass(frozen=True)
class CheckpointIssue:
    kind: IssueKind
    tensor: str
    message: str

    def to_dict(self) -> dict:
        return {"kind": self.kind, "tensor": self.tensor, "message": self.message}


def parse_safetensors_header(data: bytes, *, file: str, file_size: int | None = None) -> dict[str, TensorInfo]:
    """Tensors described by the first bytes of a safetensors file (at least 8 + header length).

    `file_size`, when known, lets a truncated file be caught here instead of at load time.
    """
    if len(data) < 8:
        raise BadInput(f"{file} is not a safetensors file: it is {len(data)} bytes long, shorter than the 8-byte header length")
    (n,) = struct.unpack("<Q", data[:8])
    if n > _MAX_HEADER or (file_size is not None and 8 + n > file_size):
        raise BadInput(f"{file} is not a valid safetensors file: its header length field says {n} bytes, "
                       f"more than the file holds (corrupt or truncated)")
    if len(data) < 8 + n:
        raise BadInput(f"{file} is truncated: its {n}-byte safetensors header is cut off")
    try:
        header = json.loads(data[8 : 8 + n].decode("utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError):
        raise BadInput(f"{file} is not a valid safetensors file: its header is not JSON (corrupt?)") from None
    if not isinstance(header, dict):
        raise BadInput(f"{file} is not a valid safetensors file: its header is not a JSON object")
    base = 8 + n
    out: dict[str, TensorInfo] = {}
    for name, meta in header.items():
        if name == "__metadata__":
            continue
        try:
            dtype = str(meta["dtype"])
            shape = tuple(int(x) for x in meta["shape"])
            b, e = (int(x) for x in meta["data_offsets"])
        except (KeyError, TypeError, ValueError):
            raise BadInput(f"{file} is not a valid safetensors file: the entry for {name!r} lacks dtype/shape/offsets") from None
        numel = 1
        for d in shape:
            numel *= d
        if dtype in DTYPE_SIZES and e - b != numel * DTYPE_SIZES[dtype]:
            raise BadInput(f"{file} is not a valid safetensors file: tensor {name!r} {list(shape)} {dtype} "
                           f"should take {numel * DTYPE_SIZES[dtype]} bytes but its offsets span {e - b}")
        if file_size is not None and base + e > file_size:
            raise BadInput(f"{file} is truncated: tensor {name!r} ends at byte {base + e} "
                           f"but the file has {file_size} bytes")
        out[name] = TensorInfo(dtype, shape, file, base + b, base + e)
    return out


def read_safetensors_header(path: str) -> dict[str, TensorInfo]:
    try:
        size = os.path.getsize(path)
        with open(path, "rb") as f:
            head = f.read(8)
            if len(head) == 8:
                (n,) = struct.unpack("<Q", head)
                if 8 + n <= min(size, _MAX_HEADER + 8):
                    head += f.read(n)
    except OSError as err:
        raise BadInput(f"cannot read {path}: {err.strerror or err}") from None
    return parse_safetensors_header(head, file=path, file_size=size)


def _json_file(path: str, missing: str) -> dict:
    """A JSON object file through `readers.json_object` (NaN, nesting past the recursion limit, bad
    UTF-8 and a wrong top-level type are one sentence), its errors as BadInput (the job's input error)."""
    try:
        with open(path, "rb") as f:
            data = f.read()
    except FileNotFoundError:
        raise BadInput(f"{path} does not exist ({missing})") from None
    except OSError as err:
        raise BadInput(f"cannot read {path}: {err.strerror or err}") from None
    try:
        return json_object(data, path)
    except UserError as err:
        raise BadInput(str(err)) from None


def read_config(path: str) -> dict:
    return _json_file(path, "expected the draft's config.json")


# keys speculators keeps at the top level of its config (everything else lives in transformer_layer_config)
_SPECULATORS_TOP = ("architectures", "draft_vocab_size", "target_hidden_size", "norm_before_residual",
                    "norm_before_fc", "fc_norm", "norm_output", "embed_requires_grad",
                    "eagle_aux_hidden_state_layer_ids", "speculators_model_type", "speculators_config",
                    "speculators_version")


def is_speculators_config(config: dict) -> bool:
    return "speculators_model_type" in config or isinstance(config.get("transformer_layer_config"), dict)


def flat_config(config: dict) -> dict:
    """One flat dict of sizes and flags: a speculators config (`Eagle3SpeculatorConfig`: every size and
    `rope_theta` inside `transformer_layer_config`, the EAGLE flags at the top) merged onto its layer
    config; any other config as it is."""
    tlc = config.get("transformer_layer_config")
    if not isinstance(tlc, dict):  # not speculators, or already flat
        return config
    out = dict(tlc)
    for k in _SPECULATORS_TOP:
        if k in config:
            out[k] = config[k]
    out.setdefault("speculators_model_type", config.get("speculators_model_type", "eagle3"))
    return out


_TORCH_DTYPES = {"float32": "F32", "float16": "F16", "bfloat16": "BF16", "float64": "F64", "int64": "I64",
                 "int32": "I32", "int16": "I16", "int8": "I8", "uint8": "U8", "bool": "BOOL"}


def torch_load_reason(err: BaseException) -> str:
    """What a failed weights-only `torch.load` means, in a few words (torch raises many types, with
    messages of a paragraph that advise turning the weights-only safety off)."""
    text = str(err).strip()
    found = re.search(r"Unsupported global: GLOBAL (\S+)", text)
    if found:
        return f"it holds a Python object ({found.group(1)}) that a weights-only load refuses"
    if "Weights only load failed" in text:
        return "it is not tensors saved by torch.save: a weights-only load refuses it"
    if "central directory" in text or "zip archive" in text:
        return "it is cut short or corrupt: its zip archive is incomplete"
    if isinstance(err, EOFError) or "Ran out of input" in text:
        return "it is empty or cut short"
    if isinstance(err, KeyError) or "magic number" in text or "invalid load key" in text:
        return "it is not a torch.save file"
    first = text.splitlines()[0] if text else type(err).__name__
    return first if len(first) <= 120 else first[:117] + "..."


def torch_load(source: Any, name: str, what: str, *, mmap: bool = True) -> Any:
    """The one way a torch file is read: weights only, on the CPU, memory-mapped when the file allows,
    with torch's warnings kept off the user's terminal (a pickle-protocol UserWarning printed two
    lines before the error) and any failure one sentence: `<name> could not be read as <what> (why)`."""
    import torch

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        try:
            if mmap:
                try:
                    return torch.load(source, map_location="cpu", weights_only=True, mmap=True)
                except (RuntimeError, TypeError):  # legacy (non-zip) files cannot be mapped; torch < 2.1 has no mmap
                    pass
            return torch.load(source, map_location="cpu", weights_only=True)
        except Exception as err:  # torch raises many types for a broken file
            raise BadInput(f"{name} could not be read as {what} ({torch_load_reason(err)})") from None


def _bin_header(path: str) -> dict[str, TensorInfo]:
    """Tensor names, dtypes and shapes of a `pytorch_model.bin` (torch.load, weights only, memory-mapped)."""
    import torch

    sd = torch_load(path, path, "a torch state dict")
    if not isinstance(sd, dict):
        raise BadInput(f"{path} is not a state dict (it holds a {type(sd).__name__})")
    return {str(k): TensorInfo(_TORCH_DTYPES.get(str(v.dtype).replace("torch.", ""), str(v.dtype)),
                               tuple(v.shape), path) for k, v in sd.items() if isinstance(v, torch.Tensor)}


def _weight_files(draft_dir: str) -> list[str]:
    """The checkpoint's weight files: a sharded index (safetensors or .bin), else every file of one kind."""
    for index_name in ("model.safetensors.index.json", "pytorch_model.bin.index.json"):
        index_path = os.path.join(draft_dir, index_name)
        if not os.path.exists(index_path):
            continue
        wm = _read_index(index_path).get("weight_map")
        if not isinstance(wm, dict) or not wm:
            raise BadInput(f"{index_path} has no weight_map (expected a sharded checkpoint index)")
        files = sorted({os.path.join(draft_dir, str(v)) for v in wm.values()})
        for p in files:
            if not os.path.exists(p):
                raise BadInput(f"{index_path} names {os.path.basename(p)}, which is not in {draft_dir}")
        return files
    names = os.listdir(draft_dir)
    for ext in (".safetensors", ".bin", ".pt", ".pth"):
        files = sorted(os.path.join(draft_dir, n) for n in names if n.endswith(ext) and n != "training_args.bin")
        if files:
            return files
    raise BadInput(f"{draft_dir} holds no weights (looked for .safetensors, pytorch_model.bin and their indexes)")


def read_header(draft_dir: str) -> CheckpointHeader:
    """config.json plus every tensor's dtype, shape and file, from headers only (no tensor data;
    `.bin` weights are loaded memory-mapped with torch, weights only)."""
    if not os.path.isdir(draft_dir):
        raise BadInput(f"{draft_dir} is not a directory (expected the draft model's directory with config.json)")
    config_path = os.path.join(draft_dir, "config.json")
    config = read_config(config_path)
    files = _weight_files(draft_dir)
    tensors: dict[str, TensorInfo] = {}
    for p in files:
        part = read_safetensors_header(p) if p.endswith(".safetensors") else _bin_header(p)
        tensors.update(part)
    return CheckpointHeader(config, tensors, draft_dir, config_path, files)


def _read_index(path: str) -> dict:
    return _json_file(path, "expected a safetensors index")


def read_int_tensor(info: TensorInfo) -> list[int]:
    """An integer tensor's values (d2t), read with the stdlib."""
    codes = {"I64": "<q", "I32": "<i", "I16": "<h", "I8": "<b", "U8": "<B"}
    if info.dtype not in codes:
        raise BadInput(f"{info.file}: expected an integer tensor for d2t, found {info.dtype}")
    try:
        with open(info.file, "rb") as f:
            f.seek(info.begin)
            raw = f.read(info.end - info.begin)
    except OSError as err:
        raise BadInput(f"cannot read {info.file}: {err.strerror or err}") from None
    fmt = codes[info.dtype]
    if len(raw) != info.end - info.begin:
        raise BadInput(f"{info.file} is truncated inside d2t")
    return [v[0] for v in struct.iter_unpack(fmt, raw)]


@dataclass(frozen=True)
class DraftSizes:
    hidden: int
    heads: int
    kv_heads: int
    head_dim: int
    intermediate: int
    vocab: int
    draft_vocab: int | None
    bias: bool
    tie: bool


def _int_key(config: dict, key: str, where: str, what: str) -> int:
    v = config.get(key)
    if isinstance(v, bool) or not isinstance(v, int) or v <= 0:
        if v is None:
            raise BadInput(f"{where} has no {key!r} (expected {what}, a positive integer)")
        raise BadInput(f"{where}: {key!r} is {v!r} (expected {what}, a positive integer)")
    return v


def draft_sizes(config: dict, where: str = "the draft config") -> DraftSizes:
    """The sizes SGLang derives from a draft config; BadInput naming the key if one is missing."""
    if isinstance(config.get("transformer_layer_config"), dict):
        config, where = flat_config(config), f"{where} (transformer_layer_config)"
    h = _int_key(config, "hidden_size", where, "the draft's hidden size")
    nh = _int_key(config, "num_attention_heads", where, "the number of attention heads")
    nkv = _int_key(config, "num_key_value_heads", where, "the number of KV heads") if "num_key_value_heads" in config else nh
    hd = _int_key(config, "head_dim", where, "the head size") if config.get("head_dim") is not None else h // nh
    inter_key = "intermediate_size_mlp" if config.get("model_type") == "llama4_text" else "intermediate_size"
    i = _int_key(config, inter_key, where, "the MLP width")
    v = _int_key(config, "vocab_size", where, "the target vocabulary size")
    dv = config.get("draft_vocab_size")
    if dv is not None:
        dv = _int_key(config, "draft_vocab_size", where, "the draft vocabulary size")
    return DraftSizes(h, nh, nkv, hd, i, v, dv, bool(config.get("bias", False)), bool(config.get("tie_word_embeddings", False)))


def is_mla_draft(config: dict, names: Sequence[str] = ()) -> bool:
    """An MLA EAGLE-3 draft: its class, or DeepSeek-V2 attention tensors (kv_a_proj_with_mqa) in the checkpoint."""
    arch = config.get("architectures")
    if isinstance(arch, list) and arch and arch[0] == MLA_DRAFT:
        return True
    return any(".self_attn.kv_a_proj_with_mqa." in n for n in names)


def expected_tensors(config: dict, *, target_hidden_size: int | None = None, num_aux: int = 3,
                     mla: bool = False) -> dict[str, tuple[int, ...]]:
    """Name -> shape for every tensor SGLang's llama_eagle3 loads (embed_tokens is optional); `mla`: the
    attention is DeepSeek-V2's (its tensors are checked by name, not listed here)."""
    config = flat_config(config)
    s = draft_sizes(config)
    ht = target_hidden_size or config.get("target_hidden_size") or s.hidden
    h = s.hidden
    exp: dict[str, tuple[int, ...]] = {
        "fc.weight": (h, num_aux * ht),
        "midlayer.self_attn.q_proj.weight": (s.heads * s.head_dim, 2 * h),
        "midlayer.self_attn.k_proj.weight": (s.kv_heads * s.head_dim, 2 * h),
        "midlayer.self_attn.v_proj.weight": (s.kv_heads * s.head_dim, 2 * h),
        "midlayer.self_attn.o_proj.weight": (h, s.heads * s.head_dim),
        "midlayer.mlp.gate_proj.weight": (s.intermediate, h),
        "midlayer.mlp.up_proj.weight": (s.intermediate, h),
        "midlayer.mlp.down_proj.weight": (h, s.intermediate),
        "midlayer.input_layernorm.weight": (h,),
        "midlayer.hidden_norm.weight": (h,),
        "midlayer.post_attention_layernorm.weight": (h,),
        "norm.weight": (h,),
    }
    if mla:
        for proj in _LLAMA_ATTENTION:
            exp.pop(f"midlayer.self_attn.{proj}.weight", None)
    if s.bias:
        exp["fc.bias"] = (h,)
    if not s.tie and s.draft_vocab is not None:
        exp["lm_head.weight"] = (s.draft_vocab, h)
    if s.draft_vocab is not None:
        exp["d2t"] = (s.draft_vocab,)
    return exp


OPTIONAL: dict[str, str] = {
    "embed_tokens.weight": "replaced by the target's embedding in SGLang",
    "t2d": "ignored by SGLang",
}
# tensors SGLang's llama draft has no parameter for: training-side norms
_IGNORED_NORM_PREFIXES = ("input_norm.", "fc_norm.", "aux_norm")


def _canonical(name: str) -> str:
    return name[len("model."):] if name.startswith("model.") else name


def _shape_message(name: str, got: tuple[int, ...], want: tuple[int, ...], h: int) -> str:
    base = name.rsplit(".", 2)[-2] if name.count(".") >= 2 else name
    if base in ("q_proj", "k_proj", "v_proj") and len(got) == 2 and got[1] != want[1]:
        return (f"{name} is {list(got)} but SGLang expects {list(want)}: the attention input is the "
                f"concatenation of the normed embedding and the normed hidden state, 2 x {h} = {2 * h}, "
                f"but this tensor takes {got[1]}")
    return f"{name} is {list(got)} but SGLang's llama_eagle3 expects {list(want)} from the draft config's sizes"


def check_tensors(
    config: dict,
    tensors: dict[str, TensorInfo],
    *,
    target_hidden_size: int | None = None,
    num_aux: int = 3,
    d2t_values: Sequence[int] | None = None,
    loader: ServedLoader = SGLANG_0_5_6,
) -> list[CheckpointIssue]:
    """Every way `tensors` and `config` differ from what the installed SGLang (`loader`) loads, in words.

    `d2t_values` enables the d2t range check; when omitted and the d2t tensor's safetensors file is on
    this machine, its values are read from there.
    """
    flat = flat_config(config)
    s = draft_sizes(flat)
    mla = is_mla_draft(flat, list(tensors))
    exp = expected_tensors(flat, target_hidden_size=target_hidden_size, num_aux=num_aux, mla=mla)
    ht = target_hidden_size or flat.get("target_hidden_size") or s.hidden
    present = {_canonical(n): n for n in tensors}
    layers = flat.get("num_hidden_layers")
    extra = _recognised(present, exp, mla, layers if isinstance(layers, int) and not isinstance(layers, bool) else 1)
    issues = [i for cname, name in sorted(present.items()) if cname not in extra
              and (i := _tensor_issue(cname, name, tensors[name], exp, ht, num_aux, s.hidden, loader)) is not None]
    issues.extend(_missing_issues(exp, present, s))
    issues.extend(_norm_flag_issues(flat, present, loader))
    issues.extend(_loader_issues(config, flat, present, s, ht, loader))
    d2t_name = present.get("d2t")
    if d2t_name is not None and "d2t" in exp:
        issues.extend(_check_d2t(tensors[d2t_name], s, d2t_values))
    return issues


_LAYER = re.compile(r"^(?:layers\.(\d+)|midlayer)\.(.+)$")


def _recognised(present: dict[str, str], exp: dict[str, tuple[int, ...]], mla: bool, layers: int) -> set[str]:
    """Names that are parts of a draft layer SGLang's loader knows but `exp` does not list: an MLA draft's
    attention, and the layers past the first of a multi-layer draft (the `layers` issue says whether the
    release builds them). Their shapes are not checked."""
    per_layer = {k[len("midlayer."):] for k in exp if k.startswith("midlayer.")}
    out: set[str] = set()
    for cname in present:
        m = _LAYER.match(cname)
        if m is None:
            continue
        index, rest = int(m.group(1) or 0), m.group(2)
        attn = mla and rest.startswith("self_attn.") and rest.split(".")[1] in MLA_ATTENTION
        if (attn and index == 0) or (1 <= index < layers and (rest in per_layer or attn)):
            out.add(cname)
    return out


def _tensor_issue(cname: str, name: str, info: TensorInfo, exp: dict[str, tuple[int, ...]], ht: int,
                  num_aux: int, hidden: int, loader: ServedLoader) -> CheckpointIssue | None:
    """What SGLang makes of one checkpoint tensor (None: it loads it as it is)."""
    op = ("input_norm" if cname.startswith("input_norm.") else "fc_norm" if cname.startswith(("fc_norm.", "aux_norm"))
          else "qk_norm" if cname.endswith(("self_attn.q_norm.weight", "self_attn.k_norm.weight")) else None)
    if op is not None and op in loader.applies:
        return None
    if cname in exp:
        want = exp[cname]
        if cname == "fc.weight" and len(info.shape) == 2 and info.shape[0] == want[0] and info.shape[1] != want[1]:
            width = info.shape[1]
            fits = f" (it fits {width // ht} aux states)" if width % ht == 0 else ""
            return CheckpointIssue("fc-width", name, (
                f"fc.weight takes {width} inputs but the draft is fed {num_aux} aux states x target hidden "
                f"{ht} = {num_aux * ht}{fits}"))
        if info.shape != want:
            return CheckpointIssue("shape", name, _shape_message(name, info.shape, want, hidden))
        return None
    if cname in OPTIONAL:
        return None
    if cname.startswith(_IGNORED_NORM_PREFIXES):
        flag = "norm_before_fc" if cname.startswith("input_norm.") else "fc_norm"
        return CheckpointIssue("ignored-norm", name, (
            f"{name} ({flag}) is a norm SGLang's llama_eagle3 does not apply: the draft was trained "
            f"with it, SGLang feeds fc un-normed inputs"))
    if cname.endswith(("self_attn.q_norm.weight", "self_attn.k_norm.weight")):
        return CheckpointIssue("ignored-norm", name, (
            f"{name} is a Qwen3 q/k norm; SGLang's llama_eagle3 runs Llama attention without it"))
    if cname.startswith("layers.0.") and "midlayer." + cname[len("layers.0."):] in exp:
        return CheckpointIssue("unknown", name, (
            f"{name} is speculators/vLLM naming that SGLang's llama_eagle3 loader skips silently "
            f"(it loads midlayer.{cname[len('layers.0.'):]}), leaving that weight random"))
    return CheckpointIssue("unknown", name, (
        f"{name} is not a parameter of SGLang's llama_eagle3: the loader skips it silently"))


def _missing_issues(exp: dict[str, tuple[int, ...]], present: dict[str, str], s: DraftSizes) -> list[CheckpointIssue]:
    out = []
    for cname in exp:
        if cname in present:
            continue
        if cname == "d2t":
            if s.draft_vocab == s.vocab:
                continue
            msg = (f"d2t is missing: with a draft vocabulary of {s.draft_vocab} (target {s.vocab}) SGLang would "
                   f"read draft ids as target ids")
        else:
            alt = "layers.0." + cname[len("midlayer."):] if cname.startswith("midlayer.") else None
            if alt and (alt in present):
                msg = f"{cname} is missing (the checkpoint has {alt} instead, which SGLang does not load)"
            else:
                msg = f"{cname} is missing: SGLang leaves it at its random initial value"
        out.append(CheckpointIssue("missing", cname, msg))
    return out


def _norm_flag_issues(flat: dict, present: dict[str, str], loader: ServedLoader) -> list[CheckpointIssue]:
    """Config flags that change the trained forward, against what the loader applies."""
    out = []
    for key, flag, op in (("norm_before_fc", "input_norm", "input_norm"), ("fc_norm", "fc_norm", "fc_norm")):
        if flat.get(key) and not any(c.startswith(flag + ".") for c in present) and op not in loader.applies:
            out.append(CheckpointIssue("ignored-norm", f"config:{key}", (
                f"the draft config sets {key}, which SGLang's llama_eagle3 ignores")))
    if flat.get("norm_before_residual") and "norm_before_residual" not in loader.applies:
        out.append(CheckpointIssue("ignored-norm", "config:norm_before_residual", (
            "the draft config sets norm_before_residual, which SGLang's llama_eagle3 ignores "
            "(it always adds the residual before hidden_norm)")))
    spec = is_speculators_config(flat)
    if spec and flat.get("norm_output") and "norm_output" not in loader.applies:
        out.append(CheckpointIssue("ignored-norm", "config:norm_output", (
            f"the draft config sets norm_output (speculators: each step feeds the normed state to the next); "
            f"{loader.name} feeds the pre-norm state")))
    if not spec and flat.get("norm_output") is False:
        out.append(CheckpointIssue("ignored-norm", "config:norm_output", (
            "the draft config sets norm_output false (SpecForge: no norm before lm_head in training); "
            "SGLang always applies the final norm before lm_head")))
    return out


def config_issues(config: dict, loader: ServedLoader = SGLANG_0_5_6) -> list[CheckpointIssue]:
    """What the draft config alone says about loading it on `loader` (no checkpoint needed): its class,
    its layer count, its aux-state and RoPE settings."""
    flat = flat_config(config)
    out = _architecture_issues(config, loader)
    layers = flat.get("num_hidden_layers")
    mla = is_mla_draft(flat)
    if isinstance(layers, int) and layers != 1 and (not loader.multi_layer or mla):
        which = "its MLA draft (kimi_k25_eagle3)" if mla else "llama_eagle3"
        out.append(CheckpointIssue("layers", "config:num_hidden_layers", (
            f"the draft has {layers} decoder layers; {loader.name}'s {which} builds exactly one "
            f"(it refuses num_hidden_layers != 1)")))
    ec = flat.get("eagle_config")
    if isinstance(ec, dict) and ec.get("use_aux_hidden_state") is False:
        out.append(CheckpointIssue("aux-config", "config:eagle_config.use_aux_hidden_state", (
            "eagle_config.use_aux_hidden_state is false: SGLang then captures no aux states and feeds the "
            "draft the target's last hidden state, not what its fc was trained on")))
    ids = ec.get("eagle_aux_hidden_state_layer_ids") if isinstance(ec, dict) else None
    if loader.num_aux is not None and isinstance(ids, list) and ids and len(ids) != loader.num_aux:
        out.append(CheckpointIssue("aux-config", "config:eagle_config.eagle_aux_hidden_state_layer_ids", (
            f"the draft config names {len(ids)} aux layers but {loader.name} builds fc for "
            f"{loader.num_aux} x target hidden whatever the config lists")))
    if isinstance(flat.get("rope_parameters"), dict) and "rope_theta" not in flat and not loader.reads_rope_parameters:
        out.append(CheckpointIssue("aux-config", "config:rope_parameters", (
            f"the draft config has rope_parameters (transformers 5) but no rope_theta / rope_scaling, which is "
            f"what {loader.name} reads: it runs the draft with theta 10000 and no scaling")))
    return out


def _loader_issues(config: dict, flat: dict, present: dict[str, str], s: DraftSizes, ht: int,
                   loader: ServedLoader) -> list[CheckpointIssue]:
    """Whether the installed SGLang can load this draft at all, and what it replaces."""
    out = config_issues(config, loader)
    replaced = loader.replaces_embedding and ht == s.hidden
    if "embed_tokens.weight" in present and replaced and flat.get("embed_requires_grad"):
        out.append(CheckpointIssue("embedding", "embed_tokens.weight", (
            "embed_tokens.weight was trained (embed_requires_grad) but SGLang replaces it with the target's "
            "embedding: the served draft is not the trained one")))
    if "embed_tokens.weight" not in present and not replaced:
        out.append(CheckpointIssue("embedding", "embed_tokens.weight", (
            f"target_hidden_size {ht} differs from hidden_size {s.hidden}, so SGLang keeps the draft's own "
            f"embedding, but the checkpoint has no embed_tokens.weight: it stays random")))
    return out


def _architecture_issues(config: dict, loader: ServedLoader) -> list[CheckpointIssue]:
    arch = config.get("architectures")
    first = arch[0] if isinstance(arch, list) and arch else None
    if first in loader.architectures or (first == MLA_DRAFT and loader.mla):
        return []
    if first == MLA_DRAFT:
        return [CheckpointIssue("architecture", "config:architectures", (
            f"an MLA EAGLE-3 draft ({MLA_DRAFT}): {loader.name} has no such class (SGLang loads it from 0.5.12)"))]
    if is_speculators_config(config):
        return [CheckpointIssue("architecture", "config:architectures", (
            f"a speculators-format draft (architectures {first}): {loader.name} cannot load it. To convert: copy "
            f"transformer_layer_config's keys (sizes, rope_theta) to the top level, set architectures "
            f"[\"LlamaForCausalLMEagle3\"], rename layers.0.* to midlayer.*, and put the aux ids under "
            f"eagle_config.eagle_aux_hidden_state_layer_ids in SGLang counting (vLLM id - 1)"))]
    what = f"architectures {first}" if first else "no architectures"
    return [CheckpointIssue("architecture", "config:architectures", (
        f"the draft config has {what}; SGLang loads EAGLE-3 drafts only as {loader.architectures[0]} "
        f"(set architectures to [\"{loader.architectures[0]}\"])"))]


def _check_d2t(info: TensorInfo, s: DraftSizes, values: Sequence[int] | None) -> list[CheckpointIssue]:
    if info.dtype not in ("I64", "I32", "I16", "I8", "U8"):
        return [CheckpointIssue("d2t-range", "d2t", f"d2t is {info.dtype}; SGLang adds it to draft ids, so it must be an integer tensor")]
    if values is None:
        if not os.path.exists(info.file) or not info.file.endswith(".safetensors"):
            return []
        values = read_int_tensor(info)
    values = list(values)
    if not values:
        return []
    if s.draft_vocab is not None and s.draft_vocab < s.vocab and not any(values):
        return [CheckpointIssue("d2t-range", "d2t", (
            f"d2t is all zero: draft id i is served as target id i, so the draft's {len(values)} tokens are the "
            f"first {len(values)} target ids, not the ones it was trained on (the trainer's initial buffer)"))]
    bad = [(i, i + v) for i, v in enumerate(values) if not 0 <= i + v < s.vocab]
    absolute = all(0 <= v < s.vocab for v in values) and all(values[i + 1] > values[i] for i in range(len(values) - 1))
    if bad and absolute:
        i, t = bad[0]
        return [CheckpointIssue("d2t-range", "d2t", (
            f"d2t holds absolute target ids (ascending, within 0..{s.vocab - 1}), not offsets: SGLang serves draft "
            f"id i as i + d2t[i] (draft id {i} -> {t}, outside the vocabulary for {len(bad)} ids)"))]
    if bad:
        i, t = bad[0]
        return [CheckpointIssue("d2t-range", "d2t", (
            f"d2t maps {len(bad)} draft ids outside the target vocabulary 0..{s.vocab - 1} "
            f"(draft id {i} -> {t}); d2t holds offsets: target id = draft id + d2t[draft id]"))]
    targets = [i + v for i, v in enumerate(values)]
    if any(targets[i + 1] <= targets[i] for i in range(len(targets) - 1)):  # no pairwise: Python 3.8
        dup = len(targets) - len(set(targets))
        return [CheckpointIssue("d2t-range", "d2t", (
            f"d2t does not map draft ids to ascending target ids ({dup} duplicates); it may hold absolute "
            f"target ids instead of offsets"))]
    return []


def summarize(issues: Sequence[CheckpointIssue]) -> list[str]:
    """One line per kind of problem: twelve `layers.0.*` tensors become one sentence."""
    lines: list[str] = []
    renamed = [i for i in issues if i.kind == "unknown" and _canonical(i.tensor).startswith("layers.0.")
               and "speculators/vLLM naming" in i.message]
    if renamed:
        lines.append(f"{len(renamed)} tensors named layers.0.* (speculators/vLLM naming) are skipped silently by "
                     f"SGLang's llama_eagle3, which loads midlayer.*: rename layers.0. to midlayer.")
    for i in issues:
        if i in renamed:
            continue
        if i.kind == "missing" and i.tensor.startswith("midlayer.") and renamed:
            continue
        lines.append(i.message)
    return lines
