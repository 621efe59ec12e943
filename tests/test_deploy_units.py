"""Deployment kinds from /proc text, the engine log decoder, the systemd drop-in (pure parts, no processes)."""

from __future__ import annotations

import dataclasses
import json

import pytest

from eagle3_tui.errors import UserError
from eagle3_tui.session.deploy.container import EngineLogDecoder
from eagle3_tui.session.deploy.systemd import dropin_path, effective_exec_start, render_dropin, unquote_exec
from eagle3_tui.session.host.deployment import Deployment, ProcView, bind_mounts, classify
from eagle3_tui.session.launch import LaunchSpec

CID = "3f2a" + "0" * 56 + "beef"
assert len(CID) == 64


@pytest.mark.parametrize(("cgroup", "engine"), [
    (f"0::/system.slice/docker-{CID}.scope\n", "docker"),  # cgroup v2, systemd driver
    (f"12:memory:/docker/{CID}\n11:pids:/docker/{CID}\n", "docker"),  # v1, cgroupfs driver
    (f"0::/machine.slice/libpod-{CID}.scope/container\n", "podman"),
])
def test_container_from_cgroup(cgroup: str, engine: str) -> None:
    dep = classify(ProcView(42, cgroup=cgroup, own_mount_ns=False, stdout="pipe:[7]"))
    assert (dep.kind, dep.engine, dep.id, dep.pod) == ("container", engine, CID, None)
    assert dep.label == f"container 3f2a… ({engine})"
    assert dep.to_json() == {"kind": "container", "engine": engine, "id": CID, "nodes": 1, "log": None}


def test_pod_refuses_restart_with_the_controller() -> None:
    cg = ("0::/kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod0a1b2c3d_4e5f_6789_abcd_ef0123456789"
          f".slice/cri-containerd-{CID}.scope\n")
    dep = classify(ProcView(42, cgroup=cg, own_mount_ns=False))
    assert dep.kind == "container" and dep.id == CID and dep.pod
    with pytest.raises(UserError, match="the pod's controller restarts it"):
        dep.check("restart")
    assert set(dep.refusals()) == {"restart", "stop", "flags"}


def test_container_id_from_mountinfo_when_the_cgroup_is_silent() -> None:
    mi = (f"612 600 0:52 /var/lib/docker/containers/{CID}/hostname /etc/hostname rw,relatime - ext4 /dev/sda1 rw\n"
          "613 600 0:53 / / rw - overlay overlay rw\n")
    dep = classify(ProcView(42, cgroup="0::/\n", mountinfo=mi, own_mount_ns=False))
    assert (dep.kind, dep.engine, dep.id) == ("container", "docker", CID)
    podman = f"1 0 0:1 /var/lib/containers/storage/overlay-containers/{CID}/userdata/hostname /etc/hostname rw - x y\n"
    assert classify(ProcView(1, mountinfo=podman)).engine == "podman"


def test_unknown_namespace_refuses_restart() -> None:
    dep = classify(ProcView(42, own_mount_ns=False))
    assert dep.kind == "container" and dep.engine is None
    with pytest.raises(UserError, match="no container engine"):
        dep.check("restart")


def test_systemd_unit_pane_pipe_process() -> None:
    unit = classify(ProcView(5, cgroup="0::/system.slice/sglang.service\n", stdout="socket:[9]"))
    assert (unit.kind, unit.unit, unit.label) == ("systemd", "sglang", "systemd unit sglang")
    assert unit.refusal("restart") is None and unit.refusal("flags") is None
    login = classify(ProcView(5, cgroup="0::/user.slice/user-0.slice/session-3.scope\n", stdout="/dev/pts/2",
                              terminal="tmux"))
    assert (login.kind, login.label) == ("pane", "tmux pane")
    with pytest.raises(UserError, match="restart --into-log"):
        login.check("restart")
    login.check("restart", into_log=True)
    assert classify(ProcView(5, stdout="pipe:[77]")).kind == "pipe"
    plain = classify(ProcView(5, stdout="/var/log/sglang.log"))
    assert (plain.kind, plain.label) == ("process", "")
    with pytest.raises(UserError, match="terminal pane or a pipe"):
        plain.check("restart", into_log=True)


def test_container_paths_through_proc_root() -> None:
    dep = Deployment("container", "docker", CID, pid=4242)
    assert dep.host_path("/models/draft/config.json") == "/proc/4242/root/models/draft/config.json"
    assert dep.host_path("/proc/4242/root/models/x") == "/proc/4242/root/models/x"
    assert Deployment(pid=1).host_path("/models/x") == "/models/x"


def test_bind_mount_host_paths_from_mountinfo() -> None:
    ctr = ("600 500 0:60 / / rw - overlay overlay rw,upperdir=/var/lib/docker/overlay2/x/diff\n"
           "601 600 254:0 /srv/models /models rw,relatime - ext4 /dev/vda rw\n"
           "602 600 0:33 /data\\040sets /data rw - tmpfs tmpfs rw\n")
    host = ("27 1 254:0 / / rw,relatime - ext4 /dev/vda rw\n"
            "40 27 0:33 / /mnt/fast rw - tmpfs tmpfs rw\n")
    binds = bind_mounts(ctr, host)
    assert binds == (("/models", "/srv/models"), ("/data", "/mnt/fast/data sets"))
    dep = Deployment("container", "docker", CID, pid=7, binds=binds)
    assert dep.host_path("/models/draft/config.json") == "/srv/models/draft/config.json"
    assert dep.host_path("/data/x") == "/mnt/fast/data sets/x"
    assert dep.host_path("/modelsX/y") == "/proc/7/root/modelsX/y"  # read through the container's root
    assert dep.editable_path("/models/draft/config.json") == "/srv/models/draft/config.json"
    with pytest.raises(UserError, match="inside the container's image"):
        dep.editable_path("/modelsX/y")  # written only through a bind mount


def test_owner_is_kept_with_the_remembered_launch() -> None:
    spec = LaunchSpec.from_argv(["python", "-m", "sglang.launch_server", "--port", "30001"], cwd="/")
    assert "owner" not in json.loads(spec.to_json())  # a plain launch's record is unchanged
    owned = LaunchSpec(spec.argv, spec.cwd, owner=f"docker:{CID}")
    back = LaunchSpec.from_dict(json.loads(owned.to_json()))
    assert back.owner == f"docker:{CID}" and back.with_argv([*spec.argv, "--x"]).owner == back.owner
    dep = Deployment.from_owner(back.owner or "")
    assert (dep.kind, dep.engine, dep.id) == ("container", "docker", CID)
    assert Deployment.from_owner("systemd:sglang").unit == "sglang"


def test_docker_json_file_and_cri_records_decode_to_server_lines() -> None:
    dec = EngineLogDecoder()
    rec = [json.dumps({"log": "Decode batch, accept len: 2.50\n", "stream": "stderr", "time": "t"}),
           json.dumps({"log": "part one ", "stream": "stderr", "time": "t"}),  # a split long line
           json.dumps({"log": "part two\n", "stream": "stderr", "time": "t"}),
           "2026-12-01T09:00:00.123456789Z stderr P cri ",
           "2026-12-01T09:00:00.123456789Z stderr F line",
           "not a record {", '{"broken json']
    assert dec(rec[:2]) == ["Decode batch, accept len: 2.50"]
    assert dec(rec[2:]) == ["part one part two", "cri line", "not a record {", '{"broken json']


@pytest.mark.parametrize("argv", [
    ["/usr/bin/python3", "-m", "sglang.launch_server", "--model-path", "/models/my model", "--port", "30000"],
    ["python", "-c", 'print("100% $HOME \\ done")', "--x=a;b"],
])
def test_dropin_is_what_systemctl_cat_merges(argv: list[str]) -> None:
    unit = "[Unit]\nDescription=x\n[Service]\nExecStart=/usr/bin/python3 -m sglang.launch_server --port 1\n"
    dropin = render_dropin(argv)
    assert dropin_path("sglang") == "/etc/systemd/system/sglang.service.d/eagle3-tui.conf"
    merged = effective_exec_start([unit, dropin])
    assert len(merged) == 1 and unquote_exec(merged[0]) == argv
    assert effective_exec_start([unit]) == ["/usr/bin/python3 -m sglang.launch_server --port 1"]
    with pytest.raises(UserError):
        render_dropin([])


def test_several_nodes_are_shown_and_not_restarted_one_alone() -> None:
    from eagle3_tui.sglang.launch import parse_launch

    args = parse_launch(["python", "-m", "sglang.launch_server", "--model-path", "/m", "--nnodes", "2",
                         "--node-rank", "0", "--dist-init-addr", "10.0.0.1:5000"])
    assert args.nodes() == (2, 0, "10.0.0.1:5000")
    from eagle3_tui.engines import get_engine

    launch = get_engine("sglang").parse_launch(args.argv)  # what discovery gives the deployment
    assert (launch.nodes, launch.node_rank, launch.dist_init) == (2, 0, "10.0.0.1:5000")
    assert parse_launch(["python", "-m", "sglang.launch_server", "--model-path", "/m"]).nodes() == (1, 0, None)
    head = Deployment(nodes=2, dist_init="10.0.0.1:5000")
    assert head.label == "2 nodes" and head.to_json()["nodes"] == 2
    assert Deployment("systemd", unit="sglang", nodes=2, node_rank=1).label == "systemd unit sglang, 2 nodes (this is node 1)"
    with pytest.raises(UserError, match="the profile names 0 node hosts: set nodes"):
        head.check("restart")
    listed = dataclasses.replace(head, node_hosts=("10.0.0.1", "10.0.0.2"))
    assert listed.label == "2 nodes: 10.0.0.1, 10.0.0.2"
    listed.check("restart")  # the head restarts every node
    listed.check("stop")
    with pytest.raises(UserError, match="change every node's command line"):
        listed.check("flags")
    with pytest.raises(UserError, match=r"this is node 1 of 2: .* attach to node 0"):
        dataclasses.replace(listed, node_rank=1).check("restart")
    with pytest.raises(UserError, match="only when each is a plain process"):
        dataclasses.replace(listed, kind="systemd", unit="sglang").check("restart")


def test_status_bar_names_the_deployment() -> None:
    from eagle3_tui.session.events import ServerView
    from eagle3_tui.ui.viewmodel import server_text

    assert server_text(ServerView(state="ready", pid=7, deployment="container 3f2a… (docker)"), 0.0).endswith(
        "· container 3f2a… (docker)")
    assert "·" not in server_text(ServerView(state="ready", pid=7), 0.0)
