"""Advice from predictions and measurements: which flags to serve (`better-flags`) and why more steps
do not help a draft whose later steps accept little (`multistep-decay`). Pure: facts in, findings out.

The cost model: one speculative iteration over a batch of b requests costs a fixed part (reading the
weights once) plus the tokens the target verifies and the draft proposes for the whole batch,
t(s, k, d; b) = t0 + b * (c_verify * (d - 1) + c_draft * s * k) (a tree of topk k drafts k tokens per
request per step), and yields b * accept_len tokens, so tok/s = b * accept_len / t. With a no-speculation
baseline at concurrency b0, t0 = b0 / baseline tok/s; c_verify and c_draft are fitted (least squares, kept
>= 0) to the benchmarked configurations' measured b * accept_len / tok/s, each at its own concurrency; with
fewer measurements than unknowns the verify cost is taken as flat. The check's predicted accept lengths
then become predicted tok/s for every configuration it predicted, at the load the deployment serves (the
running requests its decode lines show), so a wide tree that wins at one request loses at forty.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from eagle3_tui.doctor.facts import Facts
from eagle3_tui.doctor.findings import Evidence, Finding
from eagle3_tui.eagle.spec_config import SpecConfig
from eagle3_tui.engines import get_engine

BETTER_FLAGS = "better-flags"
MULTISTEP_DECAY = "multistep-decay"
TREE_LOW_LOAD = "tree-low-load"
MIN_GAIN = 1.05  # advise only past a 5% predicted gain
DECAY_DROP = 0.15  # later steps' acceptance this far below step 0's (absolute) is a decay
LIVE_MATCH = 0.15  # live within 15% of the prediction: serving is not what loses the tokens

@dataclass(frozen=True)
class Measured:
    config: SpecConfig
    accept_len: float
    tok_s: float
    batch: int = 1
    """Requests in flight while it was measured (the benchmark's concurrency)."""

    @property
    def iteration_s(self) -> float:
        return self.batch * self.accept_len / self.tok_s


@dataclass(frozen=True)
class CostModel:
    """Seconds per speculative iteration over b requests: t0 + b * (c_verify * (d - 1) + c_draft * steps * topk)."""

    t0: float
    c_verify: float
    c_draft: float
    calibrated_on: int
    baseline: bool  # t0 from a measured baseline

    def iteration_s(self, cfg: SpecConfig, batch: int = 1) -> float:
        s, k, d = cfg
        return self.t0 + batch * (self.c_verify * (d - 1) + self.c_draft * s * k)

    def tok_s(self, cfg: SpecConfig, accept_len: float, batch: int = 1) -> float:
        """Output tok/s of the whole batch."""
        return batch * accept_len / self.iteration_s(cfg, batch)


def measured_configs(rows: Iterable[Any], boundaries: Sequence[int] | None) -> list[Measured]:
    """Speculative benchmark (and sweep) ledger rows on these boundaries, the latest per configuration."""
    latest: dict[SpecConfig, Measured] = {}
    for r in rows:
        cfg_d = getattr(r, "config", {}) or {}
        res = getattr(r, "results", {}) or {}
        if getattr(r, "kind", "") not in ("benchmark", "sweep") or getattr(r, "is_baseline", False):
            continue
        if boundaries is not None and cfg_d.get("boundaries") not in (None, list(boundaries)):
            continue
        src = res if getattr(r, "kind", "") == "sweep" else cfg_d
        try:
            cfg = SpecConfig(int(src["steps"]), int(src["topk"]), int(src["draft_tokens"]))
        except (KeyError, TypeError, ValueError):
            continue
        acc, tps = getattr(r, "accept_len", None), getattr(r, "tok_s", None)
        if acc and tps and acc > 0 and tps > 0:
            latest[cfg] = Measured(cfg, float(acc), float(tps), batch_of(res))
    return list(latest.values())


def batch_of(results: dict[str, Any]) -> int:
    """A benchmark row's concurrency (rows before it was recorded: 1, as the model assumed then)."""
    c = results.get("concurrency")
    return c if isinstance(c, int) and not isinstance(c, bool) and c > 0 else 1


def _solve2(rows: list[tuple[float, float, float]]) -> tuple[float, float]:
    """Least squares y = a*x1 + b*x2 over (x1, x2, y); a, b >= 0 (one fitted alone when the other is < 0)."""
    sxx = sum(x1 * x1 for x1, _, _ in rows)
    syy = sum(x2 * x2 for _, x2, _ in rows)
    sxy = sum(x1 * x2 for x1, x2, _ in rows)
    sx = sum(x1 * y for x1, _, y in rows)
    sy = sum(x2 * y for _, x2, y in rows)
    det = sxx * syy - sxy * sxy
    if det > 1e-12 * max(sxx * syy, 1e-30):
        a, b = (sx * syy - sy * sxy) / det, (sy * sxx - sx * sxy) / det
        if a >= 0 and b >= 0:
            return a, b
    b_only = max(sy / syy, 0.0) if syy > 0 else 0.0
    a_only = max(sx / sxx, 0.0) if sxx > 0 else 0.0
    err_b = sum((y - b_only * x2) ** 2 for _, x2, y in rows)
    err_a = sum((y - a_only * x1) ** 2 for x1, _, y in rows)
    return (0.0, b_only) if err_b <= err_a else (a_only, 0.0)


def _regressors(m: Measured, t0: float) -> tuple[float, float, float]:
    s, k, d = m.config
    return float(m.batch * (d - 1)), float(m.batch * s * k), m.iteration_s - t0


def calibrate(measured: Sequence[Measured], baseline_tps: float | None,
              baseline_batch: int = 1) -> CostModel | None:
    """The cost model fitted to the measured configurations (None when nothing was measured, or
    when there is neither a baseline nor three configurations to fit t0 from). `baseline_batch`: the
    baseline's concurrency (its iteration produced that many tokens)."""
    if not measured:
        return None
    iters = [m.iteration_s for m in measured]
    if baseline_tps and baseline_tps > 0:
        t0 = max(baseline_batch, 1) / baseline_tps
        rows = [_regressors(m, t0) for m in measured]
        if len({(x1, x2) for x1, x2, _ in rows}) >= 2:
            cv, cd = _solve2(rows)
        else:  # one configuration: the verify cost is taken as flat, the rest is the draft's
            cv, cd = 0.0, max(rows[0][2], 0.0) / max(rows[0][1], 1.0)
        return CostModel(t0, cv, cd, len(measured), True)
    if len(measured) < 3:
        return None
    # no baseline: t0 is a third unknown, scanned over fractions of the fastest iteration, each with
    # its least-squares costs; the best fit wins
    best: CostModel | None = None
    best_err = float("inf")
    t_min = min(iters)
    for i in range(1, 20):
        t0 = t_min * i / 20
        rows = [_regressors(m, t0) for m in measured]
        cv, cd = _solve2(rows)
        err = sum((y - cv * x1 - cd * x2) ** 2 for x1, x2, y in rows)
        if err < best_err:
            best, best_err = CostModel(t0, cv, cd, len(measured), False), err
    return best


def _served(f: Facts) -> SpecConfig | None:
    if f.served_config is not None:
        return f.served_config
    e = f.effective
    if e is None or not e.speculative or None in (e.steps, e.topk, e.draft_tokens):
        return None
    return SpecConfig(int(e.steps or 0), int(e.topk or 0), int(e.draft_tokens or 0))


def _predictions(f: Facts) -> dict[SpecConfig, float]:
    out: dict[SpecConfig, float] = {}
    for p in f.predictions:
        if p.accept_len is not None and p.config not in out:
            out[p.config] = p.accept_len
    return out


def _agreement(model: CostModel, measured: Sequence[Measured], preds: dict[SpecConfig, float]) -> float | None:
    """Worst relative error of the model's tok/s against the measured, from the predicted accept lengths."""
    errs = [abs(model.tok_s(m.config, preds[m.config], m.batch) - m.tok_s) / m.tok_s
            for m in measured if m.config in preds]
    return max(errs) if errs else None


def served_load(f: Facts) -> tuple[int, str]:
    """The batch the deployment serves: its decode lines' running requests (mean over the window), else the
    latest benchmark's concurrency, else one request; and what said it."""
    if f.running_reqs_mean is not None and f.running_reqs_mean >= 0.5:
        return max(1, round(f.running_reqs_mean)), "running requests in the server log (mean)"
    if f.bench_concurrency:
        return f.bench_concurrency, "the benchmark's concurrency"
    return 1, "one request (no load seen)"


def better_flags(f: Facts) -> Finding | None:
    """The predicted-fastest configuration the engine can serve, when it beats the served one by more than 5%."""
    engine = get_engine(f.engine)
    preds = {c: a for c, a in _predictions(f).items() if engine.serves(c)}
    if not preds:
        return None
    measured = list(f.measured_configs)
    model = calibrate(measured, f.baseline_tps, f.baseline_batch or 1)
    served = _served(f)
    batch, load_from = served_load(f)
    if model is None:
        top = max(preds, key=lambda c: preds[c])
        why = ("no speculative configuration was benchmarked on these boundaries" if not measured
               else f"{len(measured)} measured configuration(s) and no baseline: too few to fit the costs")
        return Finding(BETTER_FLAGS, "info", f"no flag advice yet: {why}",
                       [Evidence("accuracy check", f"highest predicted accept length: {top.describe()} "
                                 f"({preds[top]:.2f}); accept length alone does not rank tok/s")],
                       "Benchmark the served flags and a baseline (or run `eagle3-tui sweep`), then ask again.")
    speeds = {c: model.tok_s(c, a, batch) for c, a in preds.items()}
    best = max(speeds, key=lambda c: speeds[c])
    by_cfg = {m.config: m for m in measured if m.batch == batch}
    current = by_cfg[served].tok_s if served in by_cfg else (speeds.get(served) if served else None)
    if current is None or best == served or speeds[best] < current * MIN_GAIN:
        return None
    agree = _agreement(model, measured, preds)
    sure = (f"calibrated on {model.calibrated_on} measured configuration(s)"
            + (" and the baseline" if model.baseline else ", no baseline"))
    title = (f"{best.describe()}: predicted {preds[best]:.2f} accepted, ~{speeds[best] / current:.2f}x your "
             f"current tok/s" + (f"; measured configurations agree within {100 * agree:.0f}%" if agree is not None
                                 else ""))
    ev = [Evidence("cost model", f"{sure}: per iteration {1e3 * model.t0:.2f} ms + per request "
                                 f"{1e3 * model.c_verify:.3f} ms per draft token verified + {1e3 * model.c_draft:.3f} "
                                 f"ms per step and tree branch; predicted at {batch} request(s) in flight "
                                 f"({load_from})")]
    for c in sorted(speeds, key=lambda c: -speeds[c]):
        m = by_cfg.get(c)
        seen = f"; measured {m.accept_len:.2f} at {m.tok_s:.1f} tok/s" if m else ""
        mark = " (served)" if c == served else ""
        ev.append(Evidence("prediction", f"{c}{mark}: accept {preds[c]:.2f}, "
                                         f"~{speeds[c]:.1f} tok/s{seen}"))
    return Finding(BETTER_FLAGS, "info" if model.calibrated_on < 2 else "warning", title, ev,
                   f"Serve {engine.flags_text(best)} (the Config pane offers it as a preset), then benchmark.")


def chain_limit(step_accept: Sequence[float], steps: int = 32) -> float:
    """tau of a chain `steps` long whose later steps accept as the last measured one does."""
    rates = list(step_accept) + [step_accept[-1]] * max(0, steps - len(step_accept))
    total, prod = 1.0, 1.0
    for a in rates[:steps]:
        prod *= a
        total += prod
    return total


def multistep_decay(f: Facts) -> Finding | None:
    """Live matches the prediction, but later draft steps accept far less than step 0: a training limit."""
    a = list(f.step_accept)
    pred, live = f.predicted_accept_len, f.live_accept_len
    if len(a) < 2 or pred is None or live is None or pred <= 0:
        return None
    if abs(live - pred) / pred > LIVE_MATCH:
        return None  # far off the prediction: online-offline-gap (or the wiring) explains it first
    later = sum(a[1:]) / len(a[1:])
    if a[0] - later < DECAY_DROP:
        return None
    ev = [
        Evidence("accuracy check", "per-step acceptance (conditional): "
                 + ", ".join(f"step {i + 1} {100 * x:.0f}%" for i, x in enumerate(a))),
        Evidence("live", f"accept length {live:.2f} against {pred:.2f} predicted for the served flags"),
        Evidence("chain limit", f"a chain of this draft reaches {chain_limit(a, len(a) + 2):.2f} at "
                                f"{len(a) + 2} steps and {chain_limit(a):.2f} at 32: more steps add little"),
    ]
    if f.accept_rate_definition:
        ev.append(Evidence("server log", f"its accept rate is {f.accept_rate_definition}: not step 0's top-1"))
    fix = "Train the draft with more test-time-training steps (its own predictions fed back); flags cannot fix this."
    from eagle3_tui.doctor.quality_rules import domain_gap

    gap = domain_gap(f)
    if gap is not None and gap[0]:
        names = ", ".join(n for n, _, _ in gap[0])
        ev.append(Evidence(f.published_source or "published", f"the draft's authors publish accept length "
                                                              f"{f.published_accept_len:.2f}; on {names} it is far "
                                                              "below (draft-domain)"))
        fix = (f"The draft saw too little data like {names}: retrain it with more in-domain data (the target's own "
               "answers to such prompts); more test-time-training steps on the same data will not lift the later "
               "steps. Flags cannot fix this.")
    return Finding(
        MULTISTEP_DECAY, "info",
        f"later draft steps accept {100 * later:.0f}% against step 0's {100 * a[0]:.0f}%: the offline top-1 "
        f"and the online accept rate measure different things, and serving loses nothing",
        ev,
        fix,
    )


LOW_LOAD = (2, 7)
"""Requests in flight where a tree's verify pass is neither free (one request) nor compute-bound (eight and up,
`load_rules.tree-too-wide`): the cost model, not a rule of thumb, says whether the tree still pays."""


def _chain_accept(f: Facts, chain: SpecConfig) -> tuple[float, str] | None:
    """A chain's accept length: the check's prediction for it, else its per-step rates over `steps` steps."""
    preds = _predictions(f)
    if chain in preds:
        return preds[chain], f"the check's prediction for {chain.describe()}"
    if len(f.step_accept) >= chain.steps:
        from eagle3_tui.eagle.predict import chain_accept_len

        return chain_accept_len(f.step_accept[:chain.steps]), "the check's per-step acceptance over the chain"
    return None


def tree_low_load(f: Facts) -> Finding | None:
    """A tree at 2-7 requests in flight: what the calibrated cost model predicts for it and for a chain of the
    same steps at this load (each extra draft token costs every request's verify pass a little)."""
    served, load = _served(f), f.running_reqs_mean
    if served is None or load is None or not (LOW_LOAD[0] - 0.5 <= load < LOW_LOAD[1] + 0.5):
        return None
    s, k, d = served
    if k <= 1 and d <= s + 1:
        return None  # a chain already
    batch = max(1, round(load))
    chain = SpecConfig(s, 1, s + 1)
    tree_acc = _predictions(f).get(served)
    tree_how = f"the check's prediction for {served.describe()}"
    if tree_acc is None and f.live_accept_len is not None:
        tree_acc, tree_how = f.live_accept_len, f.live_source
    chain_got = _chain_accept(f, chain)
    model = calibrate(list(f.measured_configs), f.baseline_tps, f.baseline_batch or 1)
    flags = get_engine(f.engine).flags_text(chain)
    ev = [Evidence(f.log_path or "server log", f"#running-req mean {load:.1f} (~{batch} requests in flight)"),
          Evidence("served", f"{served.describe()}: a tree of {d} draft tokens")]
    missing = [what for what, v in (("a cost model (benchmark the served flags and a baseline, or run "
                                     f"`eagle3-tui sweep -c {batch}`)", model),
                                    ("the tree's accept length (the offline check or the live log)", tree_acc),
                                    ("a chain's accept length (the offline check's per-step acceptance)", chain_got))
               if v is None]
    if missing or model is None or tree_acc is None or chain_got is None:
        return Finding(TREE_LOW_LOAD, "info",
                       f"a tree of {d} draft tokens at ~{batch} requests in flight: no chain comparison yet",
                       [*ev, Evidence("missing", "; ".join(missing))],
                       f"Benchmark a chain ({flags}) against the tree at this load: `eagle3-tui sweep -c {batch}`.")
    chain_acc, chain_how = chain_got
    t_tree, t_chain = model.tok_s(served, tree_acc, batch), model.tok_s(chain, chain_acc, batch)
    ev += [Evidence("cost model", f"calibrated on {model.calibrated_on} measured configuration(s)"
                                  + (" and the baseline" if model.baseline else "") + f": per iteration "
                                  f"{1e3 * model.t0:.2f} ms + per request {1e3 * model.c_verify:.3f} ms per draft token "
                                  f"verified + {1e3 * model.c_draft:.3f} ms per step and branch"),
           Evidence("prediction", f"tree {served}: accept {tree_acc:.2f} ({tree_how}), ~{t_tree:.1f} tok/s at {batch}"),
           Evidence("prediction", f"chain {chain}: accept {chain_acc:.2f} ({chain_how}), ~{t_chain:.1f} tok/s at "
                                  f"{batch}")]
    if t_chain >= t_tree * MIN_GAIN:
        return Finding(TREE_LOW_LOAD, "warning",
                       f"at ~{batch} requests in flight the cost model predicts a chain ({chain.describe()}) at "
                       f"~{t_chain:.1f} tok/s against the tree's ~{t_tree:.1f} ({t_chain / t_tree:.2f}x)", ev,
                       f"Serve {flags}, then benchmark at this load (`eagle3-tui bench -c {batch}`).")
    return Finding(TREE_LOW_LOAD, "info",
                   f"at ~{batch} requests in flight the cost model predicts the tree ~{t_tree:.1f} tok/s, a chain "
                   f"({chain.describe()}) ~{t_chain:.1f}: the tree still pays at this load", ev,
                   f"Keep the tree; check again if the load passes {LOW_LOAD[1]} requests in flight.")


ADVICE_RULES = ((BETTER_FLAGS, better_flags), (MULTISTEP_DECAY, multistep_decay), (TREE_LOW_LOAD, tree_low_load))
