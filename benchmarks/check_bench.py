"""Throughput of the accuracy check against a plain batched torch forward and a per-token loop.

All three run the same draft (random weights, SGLang llama_eagle3 layout) on the same tensors in
the same process, so the ratios hold on any machine:

* check      the check's inner loop for one wiring (batching, padding, draft forward, d2t mapping,
             top-1/top-5 and chain bookkeeping), one chain step so it matches the plain forward;
* plain      `model(ids, aux)` + argmax over the same batches, nothing else (the reference);
* per-token  one position at a time with a KV cache, the way a hand-written script decodes.

Budget (DESIGN.md): check / plain >= 0.8. Run `--device cuda --size kimi` on a GPU host for the
Kimi-K2.5-sized draft (hidden 7168, 64 heads, 32k draft vocab, bf16).

    python benchmarks/check_bench.py [--device cpu|cuda] [--size small|kimi] [--threads N]
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from pathlib import Path

SIZES = {
    # hidden, heads, kv_heads, head_dim, intermediate, vocab, draft_vocab, seq_len, files
    "small": dict(hidden=256, heads=4, kv_heads=4, head_dim=64, inter=768, vocab=8192, draft_vocab=2048,
                  seq_len=256, files=16),
    "kimi": dict(hidden=7168, heads=64, kv_heads=64, head_dim=112, inter=18432, vocab=163840, draft_vocab=32000,
                 seq_len=1024, files=16),
}


def build(root: Path, size: dict, device: str, dtype) -> tuple[Path, Path, str]:
    import torch
    from safetensors.torch import save_file

    h, nh, nkv, hd, inter = size["hidden"], size["heads"], size["kv_heads"], size["head_dim"], size["inter"]
    v, vd, t = size["vocab"], size["draft_vocab"], size["seq_len"]
    g = torch.Generator(device=device).manual_seed(0)

    def rnd(*shape: int, std: float = 0.02) -> torch.Tensor:
        return (torch.randn(*shape, generator=g, device=device, dtype=torch.float32) * std).to(dtype).cpu()

    cfg = {"architectures": ["LlamaForCausalLMEagle3"], "model_type": "llama", "hidden_size": h,
           "num_attention_heads": nh, "num_key_value_heads": nkv, "head_dim": hd, "intermediate_size": inter,
           "num_hidden_layers": 1, "vocab_size": v, "draft_vocab_size": vd, "rms_norm_eps": 1e-6,
           "rope_theta": 10000.0, "target_hidden_size": h}
    draft = root / "draft"
    draft.mkdir()
    (draft / "config.json").write_text(json.dumps(cfg))
    w = {
        "fc.weight": rnd(h, 3 * h),
        "midlayer.self_attn.q_proj.weight": rnd(nh * hd, 2 * h),
        "midlayer.self_attn.k_proj.weight": rnd(nkv * hd, 2 * h),
        "midlayer.self_attn.v_proj.weight": rnd(nkv * hd, 2 * h),
        "midlayer.self_attn.o_proj.weight": rnd(h, nh * hd),
        "midlayer.mlp.gate_proj.weight": rnd(inter, h),
        "midlayer.mlp.up_proj.weight": rnd(inter, h),
        "midlayer.mlp.down_proj.weight": rnd(h, inter),
        "midlayer.input_layernorm.weight": torch.ones(h, dtype=dtype),
        "midlayer.hidden_norm.weight": torch.ones(h, dtype=dtype),
        "midlayer.post_attention_layernorm.weight": torch.ones(h, dtype=dtype),
        "norm.weight": torch.ones(h, dtype=dtype),
        "lm_head.weight": rnd(vd, h),
        "d2t": torch.arange(vd) * (v // vd) - torch.arange(vd),
    }
    save_file(w, str(draft / "model.safetensors"))
    del w
    target = root / "target"
    target.mkdir()
    (target / "config.json").write_text(json.dumps({"hidden_size": h, "num_hidden_layers": 61, "vocab_size": v}))
    save_file({"model.embed_tokens.weight": rnd(v, h, std=1.0)}, str(target / "model.safetensors"))
    data = root / "data"
    data.mkdir()
    for i in range(size["files"]):
        ids = torch.randint(0, v, (t,), generator=torch.Generator().manual_seed(i))
        slots = [rnd(t, h, std=1.0 if k == 0 else 30.0) for k in range(4)]
        torch.save({"input_ids": ids, "loss_mask": torch.ones(t, dtype=torch.long), "hidden_states": slots},
                   data / f"data_{i}.pt")
    return draft, target, str(data / "*.pt")


def tree_predict(model, batches, device, sync) -> float:
    """Seconds for eagle/predict.py's grid over `batches` (one topk-4 tree pass, 5 steps deep)."""
    import torch

    from eagle3_tui.eagle import predict

    full = []
    for ids, aux in batches:
        lab = torch.cat([ids, ids.new_full((ids.shape[0], 6), -1)], dim=1)
        full.append((ids, aux, lab, torch.ones_like(ids, dtype=torch.bool)))
    sync()
    t = time.perf_counter()
    predict.predict_grid(model, full, [(3, 4, 8), (5, 4, 8), (5, 4, 16)], device)
    sync()
    return time.perf_counter() - t


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--device", default="cpu")
    p.add_argument("--size", default="small", choices=sorted(SIZES))
    p.add_argument("--threads", type=int, default=1)
    p.add_argument("--dtype", default=None, help="default: float32 on CPU, bfloat16 on CUDA")
    p.add_argument("--repeat", type=int, default=5)
    p.add_argument("--per-token-positions", type=int, default=64)
    a = p.parse_args(argv)

    import torch

    torch.set_num_threads(a.threads)
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
    from eagle3_tui.eagle import accuracy, datasets, wiring
    from eagle3_tui.eagle import checkpoint as ck
    from eagle3_tui.eagle.drafter import KVCache

    if a.device.startswith("cuda") and not torch.cuda.is_available():
        print("check_bench: --device cuda but torch sees no CUDA device", file=sys.stderr)
        return 2
    dtype_name = a.dtype or ("bfloat16" if a.device.startswith("cuda") else "float32")
    dtype = getattr(torch, dtype_name)
    device = torch.device(a.device)
    size = SIZES[a.size]
    with tempfile.TemporaryDirectory(prefix="eagle3-check-bench-") as tmp:
        t0 = time.perf_counter()
        draft, target, data_glob = build(Path(tmp), size, a.device, dtype)
        build_s = time.perf_counter() - t0
        opts = accuracy.CheckOptions(str(draft), data_glob, str(target), steps=1, device=a.device, dtype=dtype_name,
                                     samples=size["files"] * size["seq_len"], batch_tokens=8 * size["seq_len"])
        # end to end once (load, findings, probe, every wiring), for the record
        t0 = time.perf_counter()
        report = accuracy.run_check(opts)
        e2e_s = time.perf_counter() - t0

        header = ck.read_header(str(draft))
        tensors = accuracy._load_draft(header)
        embed = accuracy.TargetWeights(str(target)).get("model.embed_tokens.weight")
        model = accuracy._drafter_module().Eagle3Drafter.from_tensors(ck.flat_config(header.config), tensors, embed)
        model = model.to(device=device, dtype=dtype)
        model.embed_weight = model.embed_weight.to(device=device, dtype=dtype)
        model.d2t = model.d2t.to(device)
        del tensors
        ds = datasets.load(data_glob, max_positions=opts.samples)
        labels = accuracy._Labels(accuracy._token_labels(ds), None, "tokens")
        w = wiring.Wiring("training", None, (0, 1, 2))
        if device.type == "cuda":
            accuracy.stage_on_device(ds, set(w.slots), device, dtype)  # as run_check does on a GPU
        tokens = sum(s.length for s in ds.samples)

        def sync() -> None:
            if device.type == "cuda":
                torch.cuda.synchronize()

        # batches exactly as the check makes them, prepared once on the device for the plain forward
        batches = []
        per = max(1, opts.batch_tokens // size["seq_len"])
        for i in range(0, len(ds.samples), per):
            smp = ds.samples[i : i + per]
            ids = torch.stack([torch.cat([s.input_ids[1:], s.input_ids[:1] * 0]) for s in smp]).to(device)
            aux = torch.stack([torch.cat([s.slots[k].to(device) for k in w.slots], -1) for s in smp]).to(device, dtype)
            batches.append((ids, aux))

        def plain() -> float:
            sync()
            t = time.perf_counter()
            with torch.inference_mode():
                for ids, aux in batches:
                    logits, _ = model(ids, aux)
                    model.to_target_ids(logits.argmax(-1))
            sync()
            return time.perf_counter() - t

        def check(steps: int = 1) -> float:
            o = accuracy.CheckOptions(**{**opts.__dict__, "steps": steps})
            sync()
            t = time.perf_counter()
            accuracy._evaluate(model, ds, labels, w, o, device, dtype, None, progress=lambda n: None)
            sync()
            return time.perf_counter() - t

        plain()
        check()  # warm up
        # interleaved, best of `repeat`: a busy machine slows both alike
        times = [(plain(), check()) for _ in range(a.repeat)]
        plain_s = min(p for p, _ in times)
        check_s = min(c for _, c in times)
        check3_s = min(check(3) for _ in range(max(1, a.repeat - 1)))
        tree_s = min(tree_predict(model, batches, device, sync) for _ in range(max(1, a.repeat - 2)))

        # per-token loop with a KV cache over the first sample
        s0 = ds.samples[0]
        n = min(a.per_token_positions, s0.length - 1)
        ids = s0.input_ids[1 : n + 1].to(device)[None]
        aux = torch.cat([s0.slots[k].to(device) for k in w.slots], -1)[:n].to(device, dtype)[None]
        sync()
        t = time.perf_counter()
        with torch.inference_mode():
            cache = KVCache()
            for i in range(n):
                logits, _, cache = model(ids[:, i : i + 1], aux[:, i : i + 1], past=cache, return_cache=True)
                int(model.to_target_ids(logits[0, -1].argmax()))
        sync()
        loop_s = time.perf_counter() - t

    res = {
        "device": a.device, "size": a.size, "dtype": dtype_name, "threads": a.threads, "tokens": tokens,
        "plain_tok_s": round(tokens / plain_s, 1),
        "check_tok_s": round(tokens / check_s, 1),
        "check_3step_tok_s": round(3 * tokens / check3_s, 1),
        "check_3step_positions_s": round(tokens / check3_s, 1),
        "per_token_loop_tok_s": round(n / loop_s, 1),
        "ratio_check_vs_plain": round(plain_s / check_s, 3),
        "gap_check_vs_per_token_loop": round((tokens / check_s) / (n / loop_s), 1),
        "e2e_s": round(e2e_s, 2), "build_s": round(build_s, 2),
        "e2e_training_top1": report.result("training").top1,
        # predict.py over the same batches: topk 4, 5 steps, read as 3/4/8, 5/4/8 and 5/4/16
        "tree_predict_positions_s": round(tokens / tree_s, 1),
        "tree_predict_cost_vs_plain": round(tree_s / plain_s, 2),
    }
    print(f"check bench: {a.size} draft on {a.device} {dtype_name}, {tokens} positions, {a.threads} thread(s)")
    print(f"  plain batched forward  {res['plain_tok_s']:>12,.0f} tok/s")
    print(f"  check (1 step)         {res['check_tok_s']:>12,.0f} tok/s   ratio {res['ratio_check_vs_plain']:.2f} "
          f"(budget >= 0.80)")
    print(f"  check (3-step chain)   {res['check_3step_positions_s']:>12,.0f} positions/s "
          f"({res['check_3step_tok_s']:,.0f} draft tok/s)")
    print(f"  per-token loop         {res['per_token_loop_tok_s']:>12,.0f} tok/s   check is "
          f"{res['gap_check_vs_per_token_loop']:.0f}x faster")
    print(f"  tree prediction 5x4    {res['tree_predict_positions_s']:>12,.0f} positions/s "
          f"({res['tree_predict_cost_vs_plain']:.1f}x a plain forward per position)")
    print(f"  end-to-end check (load, probe, 3 wirings): {res['e2e_s']:.2f} s")
    print(json.dumps(res))
    return 0 if res["ratio_check_vs_plain"] >= 0.8 else 1


if __name__ == "__main__":
    raise SystemExit(main())
