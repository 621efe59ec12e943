"""Small worlds written exactly as the two big trainers write them, with a draft perfect by construction.

Files, read from the trainers' code (sgl-project/SpecForge a6b6b023, vllm-project/speculators c05b95b3):

* SpecForge `scripts/prepare_hidden_states.py` (`_get_file_path`, `_save_tensor_sync`): one `torch.save`
  dict per sample, optionally gzip'd, in `OUT/rows_{g}-{g+2000}/data_{i}.ckpt[.gz]`, keys `input_ids`
  [T] and `loss_mask` [T] (int64, from the tokenized batch), `aux_hidden_state` [1, T, 3H] and
  `hidden_state` [1, T, H] (the target's final, post-norm state; captured in the target's bf16).
  Its draft export (`specforge/export/to_sglang.py`) writes SGLang names: `fc.weight`, `midlayer.*`,
  `norm.weight`, `lm_head.weight`, `t2d` (bool [V]), `d2t` (int64 [Vd]), no embedding; the config has
  the field set of `configs/llama3-8B-eagle3.json` (architectures LlamaForCausalLMEagle3, ...).
* speculators `scripts/prepare_data.py` + `data_generation/preprocessing.py`: `OUT/*.arrow` (datasets
  `save_to_disk`: rows `input_ids`, `loss_mask`, `seq_len`), `OUT/token_freq.pt` (a dict id -> count);
  `scripts/data_generation_offline.py` + `hs_connectors/transfer.py`: `OUT/hidden_states/hs_{i}.safetensors`
  with `hidden_states` [T, 4, H] (aux layers 2, N//2, N-3 then the last layer N, pre-norm; bf16) and
  `token_ids` [T] int64. Its drafts (`models/eagle3/config.py`, `core.py`) carry every size inside
  `transformer_layer_config` (the field set of nm-testing/EAGLE3-LLaMA3.1-Instruct-8B-converted), and
  the weights `fc.weight`, `layers.0.*`, `norm.weight`, `lm_head.weight`, `embed_tokens.weight`, `d2t`, `t2d`.

The target's head rows are orthonormal, so a final state 2*W[a] + 3*W[b] has the full-vocabulary
argmax b and, with b outside the draft vocabulary, the in-vocabulary argmax a. The world sets a = the
draft's own step-0 prediction at every position: the draft is perfect in speculators' definition
(draft-vocab argmax) and misses exactly the positions marked out-of-vocabulary in SGLang's and SpecForge's.
"""

from __future__ import annotations

import gzip
import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

V, VD, H, NH, NKV, INTER, T, N, STEPS = 50, 30, 64, 4, 2, 128, 40, 12, 3
PROMPT = 5  # loss mask 0 on the first tokens (the prompt)


def sglang_config(**extra: Any) -> dict:
    """A SpecForge/SGLang draft config (the keys of SpecForge's configs/llama3-8B-eagle3.json, sized down)."""
    cfg = {
        "architectures": ["LlamaForCausalLMEagle3"], "bos_token_id": 1, "eos_token_id": 2, "hidden_act": "silu",
        "hidden_size": H, "initializer_range": 0.02, "intermediate_size": INTER, "max_position_embeddings": 2048,
        "model_type": "llama", "num_attention_heads": NH, "num_key_value_heads": NKV, "num_hidden_layers": 1,
        "pad_token_id": 0, "rms_norm_eps": 1e-05, "rope_theta": 10000.0, "tie_word_embeddings": False,
        "torch_dtype": "bfloat16", "transformers_version": "4.51.0", "use_cache": True, "vocab_size": V,
        "draft_vocab_size": VD,
    }
    cfg.update(extra)
    return cfg


def speculators_config(ids: list[int] | None = None, *, norm_output: bool = False, model_type: str = "llama",
                       **layer_extra: Any) -> dict:
    """A speculators Eagle3SpeculatorConfig as `save_pretrained` writes it (nm-testing's field set)."""
    tlc = {"head_dim": H // NH, "hidden_act": "silu", "hidden_size": H, "intermediate_size": INTER,
           "max_position_embeddings": 2048, "model_type": model_type, "num_attention_heads": NH,
           "num_hidden_layers": 1, "num_key_value_heads": NKV, "rms_norm_eps": 1e-05, "rope_scaling": None,
           "rope_theta": 10000.0, "vocab_size": V}
    tlc.update(layer_extra)
    return {
        "architectures": ["Eagle3Speculator"], "auto_map": {"": "speculators.models.eagle3.Eagle3SpeculatorConfig"},
        "draft_vocab_size": VD, "eagle_aux_hidden_state_layer_ids": ids, "embed_requires_grad": False,
        "fc_norm": False, "has_no_defaults_at_init": False, "norm_before_fc": False, "norm_before_residual": False,
        "norm_output": norm_output,
        "speculators_config": {
            "algorithm": "eagle3", "default_proposal_method": "greedy",
            "proposal_methods": [{"accept_tolerance": 0.0, "proposal_type": "greedy", "speculative_tokens": STEPS,
                                  "verifier_accept_k": 1}],
            "verifier": {"architectures": ["LlamaForCausalLM"], "name_or_path": "meta-llama/Llama-3.1-8B-Instruct"}},
        "speculators_model_type": "eagle3", "speculators_version": "0.3.0", "target_hidden_size": None,
        "torch_dtype": "bfloat16", "transformer_layer_config": tlc, "transformers_version": "4.56.0",
    }


def to_speculators_names(tensors: dict[str, Any], embed: Any) -> dict[str, Any]:
    """SGLang names -> speculators names (`layers.0.`), with the frozen embedding copy it saves."""
    out = {("layers.0." + k[len("midlayer."):] if k.startswith("midlayer.") else k): v for k, v in tensors.items()}
    out["embed_tokens.weight"] = embed
    return out


@dataclass
class TrainerWorld:
    root: Path
    target: Path
    sglang_draft: Path  # SpecForge export / SGLang names
    speculators_draft: Path  # the same weights in speculators' names and config
    tokens: list[Any]
    slots: list[list[Any]]  # per sample: the 3 aux states [T, H] (bf16 values)
    final: list[Any]  # per sample [T, H]: the target's final (post-norm) state
    oov: list[Any]  # per sample bool [T] at label index u: the full-vocab argmax at u is out of the draft vocab
    full: list[Any]  # per sample [T]: the target's full-vocabulary argmax at u
    in_vocab: list[Any]  # per sample [T]: its argmax inside the draft vocabulary
    chain: list[list[Any]]  # per sample, per step: the draft's target-id prediction [T]
    masks: list[Any] = field(default_factory=list)  # per sample loss mask [T] (int64)
    d2t: Any = None


def _bf16(x: Any) -> Any:
    import torch

    return x.to(torch.bfloat16).to(torch.float32)


def build(root: Path, *, n_samples: int = 10, seed: int = 0, tied: bool = False, draft_cfg: dict | None = None,
          oov_every: int = 4, fwd: Any = None, spec_cfg: dict | None = None) -> TrainerWorld:
    """A target (head, final norm, embedding), a random draft in both naming schemes, and the states that
    make it perfect under speculators' definition; the data folders are written by `write_*`."""
    import torch
    from safetensors.torch import save_file

    from eagle3_tui.eagle.drafter import Eagle3Drafter

    g = torch.Generator().manual_seed(seed)
    torch.manual_seed(seed)
    q, _ = torch.linalg.qr(torch.randn(H, H, generator=g))
    head = _bf16(q[:V].contiguous())  # orthonormal rows: logits of sum c_i W[i] are the c_i
    embed = head if tied else _bf16(torch.randn(V, H, generator=g))
    target = root / "target"
    target.mkdir(parents=True)
    tcfg = {"architectures": ["LlamaForCausalLM"], "model_type": "llama", "hidden_size": H, "num_hidden_layers": N,
            "num_attention_heads": NH, "num_key_value_heads": NKV, "intermediate_size": INTER, "vocab_size": V,
            "rms_norm_eps": 1e-05, "rope_theta": 500000.0, "tie_word_embeddings": tied, "torch_dtype": "bfloat16"}
    (target / "config.json").write_text(json.dumps(tcfg))
    tw = {"model.embed_tokens.weight": embed, "model.norm.weight": torch.ones(H)}
    if not tied:
        tw["lm_head.weight"] = head
    save_file({k: v.to(torch.bfloat16).contiguous() for k, v in tw.items()}, str(target / "model.safetensors"))

    cfg = draft_cfg or sglang_config()
    model = Eagle3Drafter(cfg, embed, fwd)
    for p in model.parameters():
        torch.nn.init.normal_(p, std=0.4)
        p.data.copy_(_bf16(p.data))
    chosen = torch.sort(torch.randperm(V, generator=g)[:VD]).values
    model.d2t.copy_(chosen - torch.arange(VD))
    t2d = torch.zeros(V, dtype=torch.bool)
    t2d[chosen] = True
    model.t2d.copy_(t2d)
    model.eval()
    outside = torch.tensor([i for i in range(V) if i not in set(chosen.tolist())])
    sd = {k: v.contiguous() for k, v in model.state_dict().items()}
    sdraft = root / "draft-sglang"
    sdraft.mkdir()
    (sdraft / "config.json").write_text(json.dumps(cfg, indent=2))
    save_file({k: (v.to(torch.bfloat16) if v.is_floating_point() else v) for k, v in sd.items()},
              str(sdraft / "model.safetensors"))
    pdraft = root / "draft-speculators"
    pdraft.mkdir()
    (pdraft / "config.json").write_text(json.dumps(spec_cfg or speculators_config(), indent=2))
    save_file({k: (v.to(torch.bfloat16) if v.is_floating_point() else v).contiguous()
               for k, v in to_speculators_names(sd, embed).items()}, str(pdraft / "model.safetensors"))

    w = TrainerWorld(root, target, sdraft, pdraft, [], [], [], [], [], [], [], d2t=model.d2t.clone())
    with torch.no_grad():
        for _ in range(n_samples):
            x = torch.randint(0, V, (T,), generator=g)
            slots = [_bf16(torch.randn(T, H, generator=g) * (5 + 5 * k)) for k in range(3)]
            ids = torch.zeros(T, dtype=torch.long)
            ids[:-1] = x[1:]
            outs = model.chain_forward(ids[None], torch.cat(slots, -1)[None], STEPS)
            chain = [model.to_target_ids(o[0].argmax(-1)) for o in outs]
            oov = torch.zeros(T, dtype=torch.bool)
            oov[1::oov_every] = True
            final = torch.zeros(T, H)
            full = torch.zeros(T, dtype=torch.long)
            inv = torch.zeros(T, dtype=torch.long)
            for u in range(T):
                a = int(chain[0][u - 1]) if u > 0 else int(chosen[0])
                b = int(outside[torch.randint(0, len(outside), (1,), generator=g)])
                final[u] = 2 * head[a] + (3 * head[b] if oov[u] else 0)
                full[u], inv[u] = (b if oov[u] else a), a
            mask = torch.ones(T, dtype=torch.long)
            mask[:PROMPT] = 0
            w.tokens.append(x)
            w.slots.append(slots)
            w.final.append(_bf16(final))
            w.oov.append(oov)
            w.full.append(full)
            w.in_vocab.append(inv)
            w.chain.append(chain)
            w.masks.append(mask)
    return w


def write_specforge(w: TrainerWorld, out: Path, *, gz: bool = False, group: int = 2000) -> Path:
    """OUT/rows_{g}-{g+group}/data_{i}.ckpt[.gz], as prepare_hidden_states.py saves each record."""
    import torch

    for i, x in enumerate(w.tokens):
        g = (i // group) * group
        d = out / f"rows_{g}-{g + group}"
        d.mkdir(parents=True, exist_ok=True)
        record = {"input_ids": x.clone(), "loss_mask": w.masks[i].clone(),
                  "aux_hidden_state": torch.cat(w.slots[i], -1).to(torch.bfloat16).unsqueeze(0),
                  "hidden_state": w.final[i].to(torch.bfloat16).unsqueeze(0)}
        if gz:
            with gzip.open(d / f"data_{i}.ckpt.gz", "wb", compresslevel=6) as f:
                torch.save(record, f)
        else:
            torch.save(record, d / f"data_{i}.ckpt")
    return out


def write_speculators(w: TrainerWorld, out: Path, *, arrow: bool = True, prenorm_scale: float = 7.0) -> Path:
    """OUT/hidden_states/hs_{i}.safetensors + OUT/token_freq.pt (+ the Arrow dataset prepare_data.py saves)."""
    import torch
    from safetensors.torch import save_file

    hs = out / "hidden_states"
    hs.mkdir(parents=True)
    freq: dict[int, int] = {}
    for i, x in enumerate(w.tokens):
        # the verifier's last layer N, before the final norm (the norm is a positive rescale here)
        layers = [*w.slots[i], w.final[i] * prenorm_scale]
        save_file({"hidden_states": torch.stack(layers, 1).to(torch.bfloat16).contiguous(), "token_ids": x.clone()},
                  str(hs / f"hs_{i}.safetensors"))
        for t in x.tolist():
            freq[t] = freq.get(t, 0) + 1
    torch.save(freq, out / "token_freq.pt")
    if arrow:
        write_arrow(out, w)
    return out


def write_arrow(out: Path, w: TrainerWorld) -> None:
    """What `datasets.Dataset.save_to_disk` leaves: an Arrow IPC stream shard, state.json, dataset_info.json."""
    import pyarrow as pa

    table = pa.table({
        "input_ids": pa.array([x.tolist() for x in w.tokens], type=pa.list_(pa.int64())),
        "loss_mask": pa.array([m.tolist() for m in w.masks], type=pa.list_(pa.int64())),
        "seq_len": pa.array([len(x) for x in w.tokens], type=pa.int64()),
    })
    name = "data-00000-of-00001.arrow"
    with pa.OSFile(str(out / name), "wb") as sink, pa.ipc.new_stream(sink, table.schema) as writer:
        writer.write_table(table)
    (out / "state.json").write_text(json.dumps({
        "_data_files": [{"filename": name}], "_fingerprint": "0" * 16, "_format_columns": None,
        "_format_kwargs": {}, "_format_type": "torch", "_output_all_columns": False, "_split": None}))
    (out / "dataset_info.json").write_text(json.dumps({"citation": "", "description": "", "features": {
        "input_ids": {"feature": {"dtype": "int64", "_type": "Value"}, "_type": "Sequence"},
        "loss_mask": {"feature": {"dtype": "int64", "_type": "Value"}, "_type": "Sequence"},
        "seq_len": {"dtype": "int64", "_type": "Value"}}}))


# -- the trainers' metrics, transcribed literally for the tests to compare with ---------------------


def specforge_acc(w: TrainerWorld, files: range, steps: int = STEPS) -> list[float]:
    """`_acc_and_loss` per TTT step: loss_mask (last position zeroed by the normalizer) padded left=False
    k times; prediction at t vs the full-vocab target token after x_{t+1+k}."""
    num, den = [0] * steps, [0] * steps
    for i in files:
        m = w.masks[i].tolist()
        m[-1] = 0
        for k in range(steps):
            mk = m[k:] + [0] * k
            for t in range(T):
                if not mk[t]:
                    continue
                den[k] += 1
                u = t + 1 + k
                num[k] += int(u < T and int(w.chain[i][k][t]) == int(w.full[i][u]))
    return [round(a / b, 4) for a, b in zip(num, den, strict=True)]


def speculators_acc(w: TrainerWorld, files: range, steps: int = STEPS,
                    masks: list[Any] | None = None) -> tuple[list[float], list[float]]:
    """`shift_batch` then `compute_metrics` per step: (full_acc_k, cond_acc_k) in the draft vocabulary."""
    full_n, full_d, cond_d = [0] * steps, [0] * steps, [0] * steps
    for i in files:
        mask = (masks or w.masks)[i].tolist()[1:]  # loss_mask[1:]
        target = w.in_vocab[i].tolist()[1:]  # verifier_last_hidden_states[1:]
        big_l = T - 1
        prev = [bool(v) for v in mask]
        for k in range(steps):
            pred = [int(p) for p in w.chain[i][k].tolist()[: big_l - k]]
            tgt, sm = target[k:], mask[k:]
            cond_d[k] += sum(prev[: big_l - k])
            for p in range(big_l - k):
                prev[p] = prev[p] and pred[p] == tgt[p]
                if sm[p]:
                    full_d[k] += 1
                    full_n[k] += int(prev[p])
    return ([round(a / b, 4) for a, b in zip(full_n, full_d, strict=True)],
            [round(a / b, 4) for a, b in zip(full_n, cond_d, strict=True)])


def served_top1(w: TrainerWorld, files: range, shift: int, masks: list[Any] | None = None) -> float:
    """SGLang's acceptance at step 0: the draft's token equals the full-vocab argmax; positions t <= T-2
    with the loss mask at t + shift (SpecForge 0, speculators 1)."""
    hit = tot = 0
    for i in files:
        m = (masks or w.masks)[i].tolist()
        for t in range(T - 1):
            if m[t + shift]:
                tot += 1
                hit += int(int(w.chain[i][0][t]) == int(w.full[i][t + 1]))
    return round(hit / tot, 4)
