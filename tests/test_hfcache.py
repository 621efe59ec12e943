"""Model and draft paths that are Hugging Face repo ids, found in the host's hub cache (session.hfcache),
and their use where the session reads the launch command's target and draft (probe.read_target)."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from eagle3_tui.profile import Profile
from eagle3_tui.remote.local import LocalHost
from eagle3_tui.session.host.hfcache import hub_cache_dir, repo_folder, repo_id_of, resolve_model_path
from eagle3_tui.session.host.inputs import input_findings
from eagle3_tui.session.host.probe import read_target
from eagle3_tui.session.launch import LaunchSpec

OLD, MAIN = "1111111111111111111111111111111111111111", "2222222222222222222222222222222222222222"


def fake_repo(cache: Path, repo_id: str, *, ref: str | None = MAIN, config: dict | None = None) -> Path:
    """A repo as huggingface_hub leaves it: blobs, snapshots of symlinks into them, refs/main."""
    folder = cache / ("models--" + repo_id.replace("/", "--"))
    (folder / "blobs").mkdir(parents=True)
    for i, rev in enumerate((OLD, MAIN)):
        blob = folder / "blobs" / f"blob{i}"
        blob.write_text(json.dumps(config or {"rev": rev}))
        snap = folder / "snapshots" / rev
        snap.mkdir(parents=True)
        (snap / "config.json").symlink_to(Path("..") / ".." / "blobs" / blob.name)
        os.utime(snap, (1_000 + i * 10, 1_000 + i * 10))
    if ref is not None:
        (folder / "refs").mkdir()
        (folder / "refs" / "main").write_text(ref)  # no trailing newline, as huggingface_hub writes it
    return folder


def test_repo_ids_and_what_cannot_be_one():
    assert repo_id_of("Qwen/Qwen3-8B") == "Qwen/Qwen3-8B"
    assert repo_id_of("gpt2") == "gpt2"
    assert repo_id_of("org/eagle3_draft.v1") == "org/eagle3_draft.v1"
    for p in ("/models/x", "./draft", "../d", "~/d", "a/b/c", "a--b/c", "a/b..c", "", "a b/c", "x" * 97):
        assert repo_id_of(p) is None, p


@pytest.mark.parametrize(("env", "want"), [
    ({"HF_HUB_CACHE": "/c/hub", "HF_HOME": "/h", "HOME": "/home/u"}, "/c/hub"),
    ({"HUGGINGFACE_HUB_CACHE": "/legacy", "HF_HOME": "/h"}, "/legacy"),
    ({"HF_HOME": "/h", "XDG_CACHE_HOME": "/x"}, "/h/hub"),
    ({"HF_HOME": "~/hf", "HOME": "/home/u"}, "/home/u/hf/hub"),
    ({"XDG_CACHE_HOME": "/x", "HOME": "/home/u"}, "/x/huggingface/hub"),
    ({"HOME": "/home/u"}, "/home/u/.cache/huggingface/hub"),
    ({}, "~/.cache/huggingface/hub"),
])
def test_hub_cache_dir_follows_the_servers_environment(env, want):
    assert hub_cache_dir(env) == want


async def test_refs_main_wins_then_newest_snapshot_then_one_sentence(tmp_path, any_host):
    host = any_host  # LocalHost and SSHHost (sftp's glob and stat) alike
    cache = tmp_path / "hub"
    folder = fake_repo(cache, "org/eagle3-draft", ref=OLD)  # refs/main names the older snapshot
    got = await resolve_model_path(host, "org/eagle3-draft", cwd=str(tmp_path), cache=str(cache), role="draft")
    assert (got.path, got.repo_id, got.revision) == (str(folder / "snapshots" / OLD), "org/eagle3-draft", OLD)
    assert json.loads((Path(got.path) / "config.json").read_text()) == {"rev": OLD}  # through the blob symlink

    (folder / "refs" / "main").unlink()  # no ref: the newest snapshot
    got = await resolve_model_path(host, "org/eagle3-draft", cwd=None, cache=str(cache), role="draft")
    assert got.revision == MAIN

    (folder / "refs" / "main").write_text("3" * 40)  # a ref to a snapshot that is gone: the newest
    got = await resolve_model_path(host, "org/eagle3-draft", cwd=None, cache=str(cache), role="draft")
    assert got.revision == MAIN
    got = await resolve_model_path(host, "org/eagle3-draft", cwd=None, cache=str(cache), role="draft", revision=OLD)
    assert got.revision == OLD  # --speculative-draft-model-revision <commit>

    missing = await resolve_model_path(host, "org/other", cwd=None, cache=str(cache), role="draft")
    assert missing.path is None
    assert missing.problem == (f"draft org/other is a Hugging Face repo id not in the host's cache ({cache}): "
                               "give draft_path in the profile")


async def test_an_existing_local_path_that_looks_like_an_id_wins(tmp_path):
    host = LocalHost()
    cache = tmp_path / "hub"
    fake_repo(cache, "org/name")
    (tmp_path / "srv" / "org" / "name").mkdir(parents=True)
    got = await resolve_model_path(host, "org/name", cwd=str(tmp_path / "srv"), cache=str(cache), role="target")
    assert got == type(got)(str(tmp_path / "srv" / "org" / "name"))
    plain = await resolve_model_path(host, "/abs/draft", cwd=None, cache=str(cache), role="draft")
    assert plain.path == "/abs/draft" and plain.problem is None  # not an id: as given, never looked up


async def test_read_target_reads_repo_ids_through_the_servers_cache(tmp_path):
    host = LocalHost()
    cache = tmp_path / "hub"
    target = fake_repo(cache, "Qwen/Qwen3-8B", config={"architectures": ["Qwen3ForCausalLM"],
                                                        "num_hidden_layers": 36, "hidden_size": 64})
    draft = fake_repo(cache, "org/eagle3-draft", config={"architectures": ["LlamaForCausalLMEagle3"]})
    argv = ["sglang", "serve", "Qwen/Qwen3-8B", "--speculative-algorithm", "EAGLE3",
            "--speculative-draft-model-path", "org/eagle3-draft", "--port", "31999"]
    spec = LaunchSpec.from_argv(argv, cwd=str(tmp_path), env={"HF_HUB_CACHE": str(cache)})
    t = await read_target(host, spec, Profile(name="t"))
    assert t.target_config_path == str(target / "snapshots" / MAIN / "config.json")
    assert (t.num_layers, t.arch) == (36, "Qwen3ForCausalLM")
    assert t.draft_config_path == str(draft / "snapshots" / MAIN / "config.json") and t.unresolved == []

    # Discovery's cache (from the whole environment) wins over the launch env; a missing draft id is a
    # finding, never a crash, and the profile's draft_path stands in when there is one.
    other = LaunchSpec.from_argv([*argv[:6], "org/missing", *argv[7:]], cwd=str(tmp_path),
                                 env={"HF_HUB_CACHE": "/nowhere"})
    other = LaunchSpec(other.argv, other.cwd, other.env, port=other.port, hf_cache=str(cache))
    t = await read_target(host, other, Profile(name="t"))
    assert t.num_layers == 36 and t.draft_config_path is None
    assert t.unresolved == [f"draft org/missing is a Hugging Face repo id not in the host's cache ({cache}): "
                            "give draft_path in the profile"]
    found = await input_findings(host, t, Profile(name="t"), t.checkpoint_path)
    assert [(f.rule_id, f.severity) for f in found] == [("model-path-not-cached", "warning")]
    assert found[0].evidence[0].detail == t.unresolved[0]

    t = await read_target(host, other, Profile(name="t", draft_path=str(draft / "snapshots" / OLD)))
    assert t.unresolved == [] and t.draft_config_path == str(draft / "snapshots" / OLD / "config.json")


def test_launch_spec_keeps_the_hub_cache_across_json_and_new_argv():
    spec = LaunchSpec(("python", "-m", "sglang.launch_server", "--model-path", "m"), "/w", hf_cache="/c/hub")
    back = LaunchSpec.from_dict(json.loads(spec.to_json()))
    assert back.hf_cache == "/c/hub" and spec.with_argv([*spec.argv, "--port", "1"]).hf_cache == "/c/hub"
    assert "hf_cache" not in json.loads(LaunchSpec(spec.argv, "/w").to_json())
    assert repo_folder("/c/hub", "org/n") == "/c/hub/models--org--n"
