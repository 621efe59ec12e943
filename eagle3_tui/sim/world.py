"""The demo world on disk: a tiny target, hidden-state data in three formats, a trained EAGLE-3 draft.

Layout of a world directory (all paths are fields of `World`):

    world.json                  recipe, content key, slot boundaries, measured quality, build time
    target/                     config.json (LlamaForCausalLM), model.safetensors, tokenizer.json
    draft/                      config.json (LlamaForCausalLMEagle3, no eagle_config), model.safetensors
    data/data_{i}.pt            speculators v1: input_ids, loss_mask, hidden_states = [h_0, h_b1, h_b2, h_b3]
    heldout/data_{i}.pt         the same format, sequences the draft never saw
    (the two exports below hold the held-out sequences, in the same order as heldout/)
    specforge/data_{i}.ckpt     SpecForge offline: input_ids, loss_mask, aux_hidden_state (cat of the
                                trained slots [h_0, h_b1, h_b2]), hidden_state (the target's final normed state)
    speculators_st/hidden_states/hs_{i}.safetensors
                                speculators' current layout: hidden_states [T, 4, H] (the same 4 slots), token_ids

The slots are [embedding, b1, b2, b3] with (b1, b2, b3) = SGLang's default boundaries for the target,
so the serving default feeds the last three slots while the draft was trained on the first three:
the seeds' bug. `ensure_world()` builds once per content key under the user cache directory and
lets concurrent callers wait on a file lock. All hidden states on disk are bfloat16, as real data is.
"""

from __future__ import annotations

import argparse
import contextlib
import fcntl
import hashlib
import json
import os
import shutil
import sys
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from eagle3_tui.errors import UserError

WORLD_FORMAT = 1


def sglang_default_boundaries(num_layers: int) -> tuple[int, int, int]:
    """SGLang's capture default (boundaries, no +1): [2, N//2, N-3]."""
    return (2, num_layers // 2, num_layers - 3)


@dataclass(frozen=True)
class World:
    """A built world; every path exists once `ensure_world` returns it."""

    root: Path
    target_dir: Path
    draft_dir: Path
    data_dir: Path
    data_glob: str
    slot_boundaries: tuple[int, ...]
    num_layers: int
    hidden_size: int
    specforge_dir: Path
    speculators_st_dir: Path
    heldout_dir: Path
    key: str = ""
    metrics: dict[str, Any] = field(default_factory=dict)

    @property
    def heldout_glob(self) -> str:
        return str(self.heldout_dir / "data_*.pt")

    @property
    def trained_boundaries(self) -> tuple[int, ...]:
        """What the draft was trained on: cat(hidden_states[:-1])."""
        return self.slot_boundaries[:-1]

    @property
    def default_boundaries(self) -> tuple[int, ...]:
        return sglang_default_boundaries(self.num_layers)

    @property
    def fix_layer_ids(self) -> list[int]:
        """SGLang config ids that serve the trained wiring (needs the embed-capture patch for -1)."""
        return [b - 1 for b in self.trained_boundaries]

    @classmethod
    def load(cls, root: Path | str) -> World:
        root = Path(root)
        meta = json.loads((root / "world.json").read_text())
        return cls(
            root=root,
            target_dir=root / "target",
            draft_dir=root / "draft",
            data_dir=root / "data",
            data_glob=str(root / "data" / "data_*.pt"),
            slot_boundaries=tuple(meta["slot_boundaries"]),
            num_layers=int(meta["num_layers"]),
            hidden_size=int(meta["hidden_size"]),
            specforge_dir=root / "specforge",
            speculators_st_dir=root / "speculators_st",
            heldout_dir=root / "heldout",
            key=str(meta.get("key", "")),
            metrics=dict(meta.get("metrics", {})),
        )


SEED_ENV = "EAGLE3_TUI_WORLD_SEED"


def default_seed() -> int:
    """The world seed `ensure`, the demo and the tests use: `EAGLE3_TUI_WORLD_SEED`, else 0. Another seed
    is another world (its own cache key), as a build on another CPU is: the suite must pass on each."""
    raw = os.environ.get(SEED_ENV, "").strip()
    if not raw:
        return 0
    try:
        return int(raw)
    except ValueError:
        raise UserError(f"{SEED_ENV}={raw!r} is not a whole number (the demo world's seed)") from None


def default_cache_root() -> Path:
    env = os.environ.get("EAGLE3_TUI_CACHE_DIR")
    if env:
        return Path(env)
    import platformdirs

    return Path(platformdirs.user_cache_dir("eagle3-tui"))


def _recipe(seed: int | None, recipe: Any = None) -> Any:
    from eagle3_tui.sim.recipe import Recipe

    if recipe is not None:
        return recipe
    return Recipe(seed=default_seed() if seed is None else seed)


def content_key(recipe: Any) -> str:
    from eagle3_tui.sim.recipe import corpus_bytes

    return recipe.key(hashlib.sha256(corpus_bytes()).hexdigest())


@contextlib.contextmanager
def _locked(path: Path) -> Iterator[None]:
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "a+") as fh:
        fcntl.flock(fh.fileno(), fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(fh.fileno(), fcntl.LOCK_UN)


def cached_world(root: Path | str | None = None, *, seed: int | None = None, recipe: Any = None) -> World | None:
    """The world for this recipe if it is already built (never builds; no torch import)."""
    base = Path(root) if root is not None else default_cache_root()
    dest = base / f"world-{content_key(_recipe(seed, recipe))}"
    return World.load(dest) if (dest / "world.json").exists() else None


def ensure_world(
    root: Path | str | None = None,
    *,
    seed: int | None = None,
    progress: Callable[[str], None] = print,
    recipe: Any = None,
) -> World:
    """The world for this recipe (default: the seed of `default_seed()`), built at most once per content
    key (concurrent callers wait)."""
    base = Path(root) if root is not None else default_cache_root()
    recipe = _recipe(seed, recipe)
    key = content_key(recipe)
    dest = base / f"world-{key}"
    if (dest / "world.json").exists():
        return World.load(dest)
    with _locked(base / f"world-{key}.lock"):
        if (dest / "world.json").exists():
            return World.load(dest)
        # Holding the lock, no one else builds this key: leftovers are from killed builds.
        for stale in base.glob(f".world-{key}.tmp-*"):
            shutil.rmtree(stale, ignore_errors=True)
        tmp = base / f".world-{key}.tmp-{os.getpid()}"
        try:
            build_world(tmp, recipe=recipe, progress=progress, key=key)
            os.replace(tmp, dest)
        finally:
            shutil.rmtree(tmp, ignore_errors=True)
    return World.load(dest)


def _save_json(path: Path, data: Any) -> None:
    path.write_text(json.dumps(data, indent=2) + "\n")


def _write_files(dest: Path, recipe: Any, target: Any, draft: Any, train_cap: Any, held_cap: Any) -> None:
    """The world on disk: target and draft (config + safetensors), training data and held-out exports."""
    from safetensors.torch import save_file

    from eagle3_tui.sim import train as T
    from eagle3_tui.sim.tokenizer import ByteTokenizer

    target_dir = dest / "target"
    target_dir.mkdir(exist_ok=True)
    _save_json(target_dir / "config.json", T.target_config(recipe))
    save_file({k: v.contiguous() for k, v in target.state_dict().items()}, str(target_dir / "model.safetensors"))
    (target_dir / "tokenizer.json").write_text(ByteTokenizer().to_json() + "\n")
    draft_dir = dest / "draft"
    draft_dir.mkdir(exist_ok=True)
    _save_json(draft_dir / "config.json", T.draft_config(recipe))
    save_file({k: v.contiguous() for k, v in draft.state_dict().items()}, str(draft_dir / "model.safetensors"))
    write_speculators_v1(dest / "data", train_cap)
    write_speculators_v1(dest / "heldout", held_cap)
    export_specforge(dest / "specforge", held_cap)
    export_speculators_st(dest / "speculators_st", held_cap)


def _world_meta(recipe: Any, key: str, default: Any, metrics: dict[str, Any], phases: dict[str, float]) -> dict[str, Any]:
    """world.json without the build times: what the world is, its file formats and measured quality."""
    return {
        "format": WORLD_FORMAT,
        "key": key,
        "recipe": {k: (list(v) if isinstance(v, tuple) else v) for k, v in vars(recipe).items()},
        "num_layers": recipe.num_layers,
        "hidden_size": recipe.hidden_size,
        "slot_boundaries": list(recipe.slot_boundaries),
        "trained_boundaries": list(recipe.slot_boundaries[:-1]),
        "default_boundaries": list(default),
        "fix_layer_ids": [b - 1 for b in recipe.slot_boundaries[:-1]],
        "formats": {
            "data": "speculators v1 .pt: hidden_states = one tensor per slot (bf16), slots as slot_boundaries",
            "specforge": "aux_hidden_state = cat(slots[:-1]); hidden_state = norm(h_N) (post-norm)",
            "speculators_st": "hidden_states [T, slots, H] with the same slots; token_ids [T]",
        },
        "metrics": metrics,
        "phases_s": phases,
    }


def build_world(
    dest: Path | str,
    *,
    seed: int = 0,
    recipe: Any = None,
    progress: Callable[[str], None] = print,
    key: str | None = None,
) -> World:
    """Build a world into `dest` (created; must not hold another world). One thread, fixed steps."""
    import torch

    from eagle3_tui.sim import train as T

    recipe = _recipe(seed, recipe)
    key = key or content_key(recipe)
    dest = Path(dest)
    dest.mkdir(parents=True, exist_ok=True)
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    t0 = time.monotonic()
    cpu0 = time.process_time()
    phases: dict[str, float] = {}

    def phase(name: str, start: float) -> None:
        phases[name] = round(time.monotonic() - start, 1)
        progress(f"[world] {name} done in {phases[name]:.1f}s")

    try:
        corpus = torch.tensor(list(T.corpus_bytes()), dtype=torch.long)
        progress(f"[world] training the target ({recipe.num_layers} layers, {recipe.target_steps} steps)")
        t = time.monotonic()
        target = T.train_target(recipe, corpus, progress)
        phase("target", t)

        t = time.monotonic()
        gen = torch.Generator().manual_seed(recipe.seed + 10)
        seqs = T.sample_sequences(corpus, recipe.num_sequences + recipe.heldout_sequences, recipe, gen)
        cap = T.capture(target, seqs, recipe)
        n = recipe.num_sequences
        train_cap, held_cap = _split(cap, n)
        phase("capture", t)

        progress(
            f"[world] training the draft on slots {list(recipe.slot_boundaries[:-1])} ({recipe.draft_steps} steps)"
        )
        t = time.monotonic()
        d2t, t2d = T.draft_vocab(train_cap.target_next, recipe.draft_vocab_size)
        embed = target.model.embed_tokens.weight.detach()
        draft = T.train_draft(recipe, embed, train_cap, d2t, t2d, progress)
        phase("draft", t)

        t = time.monotonic()
        _write_files(dest, recipe, target, draft, train_cap, held_cap)
        phase("write", t)

        t = time.monotonic()
        default = sglang_default_boundaries(recipe.num_layers)
        metrics = measure_world(dest, recipe.slot_boundaries, recipe.ttt_steps)
        metrics["target_data_top1"] = round(
            float((cap.target_next[:, :-1] == cap.input_ids[:, 1:]).float().mean()), 4
        )
        trained_eval, default_eval = metrics["trained"], metrics["default"]
        phase("evaluate", t)

        meta = _world_meta(recipe, key, default, metrics, phases)
        meta["build_seconds"] = round(time.monotonic() - t0, 1)
        # CPU time of the one build thread: the cost without other load on the machine
        meta["build_cpu_seconds"] = round(time.process_time() - cpu0, 1)
        _save_json(dest / "world.json", meta)
        progress(
            f"[world] built in {meta['build_seconds']:.0f}s ({meta['build_cpu_seconds']:.0f}s CPU): top-1 trained {trained_eval['top1']:.2f} / "
            f"default {default_eval['top1']:.2f}, predicted accept len {trained_eval['predicted_accept_len']:.2f} / "
            f"{default_eval['predicted_accept_len']:.2f}"
        )
    finally:
        torch.set_num_threads(threads)
    return World.load(dest)


def measure_world(root: Path | str, slot_boundaries: Any, steps: int = 3) -> dict[str, Any]:
    """Draft quality measured on the files written: held-out bf16 slots, the target's greedy tokens.

    Top-1 and the chain-predicted accept length under the trained wiring (slots[:-1]) and SGLang's
    default; the mean norm of each slot.
    """
    import torch
    from safetensors.torch import load_file

    from eagle3_tui.eagle.drafter import Eagle3Drafter
    from eagle3_tui.sim import train as T
    from eagle3_tui.sim.target import TargetModel

    root = Path(root)
    tcfg = json.loads((root / "target" / "config.json").read_text())
    target = TargetModel.from_tensors(tcfg, load_file(str(root / "target" / "model.safetensors")))
    dcfg = json.loads((root / "draft" / "config.json").read_text())
    draft = Eagle3Drafter.from_tensors(
        dcfg, load_file(str(root / "draft" / "model.safetensors")), target.model.embed_tokens.weight.detach()
    )
    files = sorted((root / "heldout").glob("data_*.pt"), key=lambda p: int(p.stem.split("_")[1]))
    samples = [torch.load(f, weights_only=True) for f in files]
    ids = torch.stack([x["input_ids"] for x in samples])
    slots = [
        torch.stack([x["hidden_states"][i] for x in samples]).float() for i in range(len(slot_boundaries))
    ]
    n = int(tcfg["num_hidden_layers"])
    with torch.no_grad():
        logits, _ = target(ids)
        full = torch.zeros(ids.shape[0], ids.shape[1], n + 1, slots[0].shape[-1])
        for b, x in zip(slot_boundaries, slots, strict=True):
            full[:, :, b] = x
        cap = T.Captured(ids, slots, full, logits.argmax(-1), slots[-1])
        trained = T.evaluate(draft, cap, tuple(slot_boundaries)[:-1], steps)
        default = T.evaluate(draft, cap, sglang_default_boundaries(n), steps)
    return {"trained": trained, "default": default, "slot_norms": T.slot_norms(cap)}


def _split(cap: Any, n: int) -> tuple[Any, Any]:
    from eagle3_tui.sim.train import Captured

    def part(sl: slice) -> Captured:
        return Captured(
            input_ids=cap.input_ids[sl],
            slots=[s[sl] for s in cap.slots],
            boundaries=cap.boundaries[sl],
            target_next=cap.target_next[sl],
            final_normed=cap.final_normed[sl],
        )

    return part(slice(0, n)), part(slice(n, None))


def _loss_mask(ids: Any) -> Any:
    import torch

    mask = torch.ones_like(ids)
    mask[0] = 0  # BOS is never a training position
    return mask


def write_speculators_v1(out: Path, cap: Any) -> None:
    """speculators' legacy v1 `.pt` files plus `sample_lengths.json` and `data_config.json`."""
    import torch

    out.mkdir(parents=True, exist_ok=True)
    lengths = {}
    for i in range(cap.input_ids.shape[0]):
        ids = cap.input_ids[i].clone()
        sample = {
            "input_ids": ids,
            "loss_mask": _loss_mask(ids),
            "hidden_states": [s[i].to(torch.bfloat16).clone() for s in cap.slots],
        }
        torch.save(sample, out / f"data_{i}.pt")
        lengths[str(i)] = int(ids.shape[0])
    _save_json(out / "sample_lengths.json", lengths)
    _save_json(
        out / "data_config.json",
        {
            "file_pattern": "data_{idx}.pt",
            "num_samples": len(lengths),
            "hidden_states": "list of [seq_len, hidden]",
        },
    )


def export_specforge(out: Path, cap: Any) -> None:
    """SpecForge offline EAGLE-3 feature files (`.ckpt` written with torch.save)."""
    import torch

    out.mkdir(parents=True, exist_ok=True)
    for i in range(cap.input_ids.shape[0]):
        ids = cap.input_ids[i].clone()
        aux = torch.cat([s[i] for s in cap.slots[:-1]], dim=-1)
        torch.save(
            {
                "input_ids": ids,
                "loss_mask": _loss_mask(ids),
                "hidden_state": cap.final_normed[i].to(torch.bfloat16).unsqueeze(0).clone(),
                "aux_hidden_state": aux.to(torch.bfloat16).unsqueeze(0).clone(),
            },
            out / f"data_{i}.ckpt",
        )


def export_speculators_st(out: Path, cap: Any) -> None:
    """speculators' current layout: `hidden_states/hs_{i}.safetensors` ([T, slots, H], token_ids)."""
    import torch
    from safetensors.torch import save_file

    hs_dir = out / "hidden_states"
    hs_dir.mkdir(parents=True, exist_ok=True)
    for i in range(cap.input_ids.shape[0]):
        stacked = torch.stack([s[i] for s in cap.slots], dim=1).to(torch.bfloat16).contiguous()
        save_file(
            {"hidden_states": stacked, "token_ids": cap.input_ids[i].clone()},
            str(hs_dir / f"hs_{i}.safetensors"),
        )


def small_recipe(seed: int = 0) -> Any:
    """A seconds-long recipe for tests of determinism and formats (not of quality)."""
    from eagle3_tui.sim.recipe import Recipe

    return replace(
        Recipe(seed=seed),
        num_layers=8,
        hidden_size=32,
        heads=2,
        intermediate_size=64,
        seq_len=32,
        target_steps=3,
        target_batch=4,
        num_sequences=6,
        heldout_sequences=3,
        draft_vocab_size=64,
        draft_intermediate_size=64,
        draft_steps=3,
        draft_batch=4,
        slot_boundaries=(0, *sglang_default_boundaries(8)),
    )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m eagle3_tui.sim.world", description=__doc__.splitlines()[0]
    )
    sub = parser.add_subparsers(dest="cmd", required=True)
    b = sub.add_parser("build", help="build a world into DIR (no cache)")
    b.add_argument("dir")
    b.add_argument("--seed", type=int, default=0)
    b.add_argument("--small", action="store_true", help="a seconds-long world for tests (not for quality)")
    e = sub.add_parser("ensure", help="build or reuse the cached world and print its path")
    e.add_argument("--seed", type=int, default=None, help=f"default: ${SEED_ENV}, else 0")
    args = parser.parse_args(argv)
    try:
        seed = default_seed() if args.seed is None else args.seed
    except UserError as err:
        print(f"python -m eagle3_tui.sim.world: {err}", file=sys.stderr)
        return 2
    args.seed = seed
    if args.cmd == "build":
        recipe = small_recipe(args.seed) if args.small else None
        world = build_world(Path(args.dir), seed=args.seed, recipe=recipe)
    else:
        world = ensure_world(seed=args.seed)
    print(world.root)
    return 0


if __name__ == "__main__":
    sys.exit(main())
