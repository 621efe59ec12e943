"""The check knows which engine serves: `--served-by` parsing, each engine's loader and SGLang's upgrade
hint (from the release table), vLLM's chain predicted per position."""

from __future__ import annotations

import pytest

from eagle3_tui.eagle.accuracy import CheckReport, WiringResult
from eagle3_tui.eagle.predict import chain_accept_len, chain_positions
from eagle3_tui.engines.served_by import ServedBy, loader_for, parse_served_by, upgrade_hint
from eagle3_tui.errors import UserError


@pytest.mark.parametrize(("text", "want"), [
    ("sglang==0.5.6", ServedBy("sglang", "0.5.6")), ("vllm==0.32.0", ServedBy("vllm", "0.32.0")),
    (" VLLM == 0.32.0 ", ServedBy("vllm", "0.32.0")), ("sglang", ServedBy("sglang", None)),
])
def test_served_by_parses(text: str, want: ServedBy) -> None:
    assert parse_served_by(text) == want


@pytest.mark.parametrize("text", ["trtllm==1.0", "sglang==", "vllm==latest", "", "sglang=0.5.6"])
def test_bad_served_by_is_one_sentence(text: str) -> None:
    with pytest.raises(UserError) as err:
        parse_served_by(text)
    msg = str(err.value)
    assert "\n" not in msg and "sglang==VERSION or vllm==VERSION" in msg


def test_each_engine_loader() -> None:
    """vLLM applies every trained norm; SGLang 0.5.6 none; 0.5.17 (from the release table) input_norm
    (norm_before_fc) and norm_output but never norm_before_residual."""
    vllm = loader_for(ServedBy("vllm", "0.32.0"))
    assert vllm.engine == "vllm" and vllm.name == "vLLM 0.32.0"
    assert {"input_norm", "norm_before_residual", "norm_output"} <= vllm.applies
    old = loader_for(ServedBy("sglang", "0.5.6"))
    assert old.engine == "sglang" and old.applies == frozenset({"rope_scaling"}) and not old.multi_layer
    new = loader_for(ServedBy("sglang", "0.5.17"))
    assert {"input_norm", "norm_output"} <= new.applies and "norm_before_residual" not in new.applies
    assert loader_for(ServedBy("sglang", None)).name == "SGLang 0.5.6"


def test_upgrade_hint_only_when_a_release_applies_it() -> None:
    old = ServedBy("sglang", "0.5.6")
    assert "upgrade to 0.5.17" in upgrade_hint(["input_norm", "feed_normed"], old)
    never = upgrade_hint(["input_norm", "norm_before_residual", "feed_normed"], old)
    assert "upgrade" not in never and "norm_before_residual" in never and "vLLM" in never
    assert upgrade_hint(["input_norm"], ServedBy("vllm", "0.32.0")) == ""
    assert upgrade_hint([], old) == ""


def test_vllm_chain_per_position() -> None:
    """Per-position acceptance is accepted-at-i over drafts: the conditional rates multiplied out; the
    mean acceptance length is one plus their sum (vLLM's `1 + accepted / drafts`)."""
    per = chain_positions([0.8, 0.5, 0.5])
    assert per == pytest.approx([0.8, 0.4, 0.2])
    assert chain_accept_len([0.8, 0.5, 0.5]) == pytest.approx(2.4)
    assert chain_positions([]) == [] and chain_accept_len([]) == 1.0


def _report(engine: str) -> CheckReport:
    w = WiringResult("draft config", [2, 6, 9], [1, 2, 3], top1=0.8, step_accept=[0.8, 0.5, 0.5],
                     predicted_accept_len=2.4, other={"by": "SGLang 0.5.6", "top1": 0.4, "predicted_accept_len": 1.5})
    return CheckReport("d", "x", steps=3, engine=engine, served_by="vLLM 0.32.0" if engine == "vllm" else "SGLang 0.5.6",
                       other_by="SGLang 0.5.6" if engine == "vllm" else "vLLM", wirings=[w],
                       predictions=[{"steps": 3, "topk": 1, "draft_tokens": 4, "accept_len": 2.2, "wiring": "draft config",
                                     "boundaries": [2, 6, 9], "depth_accept": [0.6, 0.5, 0.5], "positions": 10}])


def test_format_names_the_engine_and_shows_the_other() -> None:
    from eagle3_tui.commands.check import format_report, format_vllm_chain

    text = format_report(_report("vllm"))
    assert "numbers as vLLM 0.32.0 serves this draft; beside: SGLang 0.5.6's" in text
    assert "40.0% 1.50" in text  # the other model's top-1 and accept length, beside the headline
    # the chain from the prediction grid's (3, 1, 4) depth rates, multiplied out, next to vLLM's measured
    lines = format_vllm_chain(_report("vllm"), measured=[0.81, 0.70, 0.60])
    assert lines[0].endswith("per-position acceptance 0.60 0.30 0.15, mean acceptance length 2.05")
    assert lines[1] == "  measured by vLLM: 0.81 0.70 0.60, mean acceptance length 3.11"
    assert format_vllm_chain(_report("sglang")) == []


def test_bad_served_by_through_the_cli(capsys: pytest.CaptureFixture[str]) -> None:
    from eagle3_tui.cli import main

    rc = main(["check", "--draft", "d", "--data", "x", "--served-by", "vllm==abc"])
    err = capsys.readouterr().err.strip().splitlines()
    assert rc == 2 and len(err) == 1 and "--served-by 'vllm==abc'" in err[0]


def test_the_loader_crosses_to_the_host_on_the_command_line() -> None:
    """A remote check gets the serving engine's loader as one argv element that the shipped script reads
    back unchanged."""
    from eagle3_tui.eagle.accuracy import parse_args
    from eagle3_tui.session.check.job import check_argv

    vllm, old = loader_for(ServedBy("vllm", "0.32.0")), loader_for(ServedBy("sglang", "0.5.6"))
    argv = check_argv("python3", "/tmp/eagle3-check-x", draft_dir="d", data_glob="x",
                      served_loader=vllm.to_dict(), other_loader=old.to_dict())
    opts, _ = parse_args(argv[3:])
    assert opts.served == vllm and opts.other == old
    with pytest.raises(SystemExit, match="is not JSON"):
        parse_args(["--draft", "d", "--data", "x", "--served-loader", "{oops"])
