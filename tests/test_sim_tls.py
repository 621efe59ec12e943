"""The sim serving https as SGLang 0.5.12+ does with --ssl-certfile/--ssl-keyfile (server_args.py), and
the console's client reaching it: `client_options` reads the flag from the launch command and goes https
(not verifying: the certificate names the server's host, not the forwarded 127.0.0.1 end)."""

from __future__ import annotations

import datetime
from pathlib import Path
from typing import Any

import httpx
import pytest

from eagle3_tui.session.host.probe import client_options
from eagle3_tui.session.launch import LaunchSpec
from eagle3_tui.sglang.client import SGLangClient


def _self_signed(dest: Path) -> tuple[Path, Path]:
    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import NameOID

    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "gpu-host.example")])
    now = datetime.datetime.now(datetime.timezone.utc)
    cert = (x509.CertificateBuilder().subject_name(name).issuer_name(name).public_key(key.public_key())
            .serial_number(x509.random_serial_number()).not_valid_before(now - datetime.timedelta(minutes=5))
            .not_valid_after(now + datetime.timedelta(days=1)).sign(key, hashes.SHA256()))
    cert_path, key_path = dest / "cert.pem", dest / "key.pem"
    cert_path.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    key_path.write_bytes(key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                                           serialization.NoEncryption()))
    return cert_path, key_path


@pytest.mark.slow
async def test_tls_sim_is_reached_over_https(sim_server: Any, tmp_path: Path) -> None:
    from tests.plugins.world import SPEC_ARGS

    cert, key = _self_signed(tmp_path)
    srv = sim_server(*SPEC_ARGS, "--sglang-version", "0.5.12", "--ssl-certfile", str(cert), "--ssl-keyfile", str(key))
    assert f"Uvicorn running on https://127.0.0.1:{srv.port}" in srv.log_text()
    spec = LaunchSpec.from_argv(["python", "-m", "sglang.launch_server", "--model-path", "m", "--port", str(srv.port),
                                 "--ssl-certfile", str(cert), "--ssl-keyfile", str(key)], cwd=None)
    opts = client_options(spec, srv.port)
    assert opts["base_url"] == f"https://127.0.0.1:{srv.port}" and opts["verify"] is False
    async with SGLangClient(opts["base_url"], api_key=opts["api_key"], verify=opts["verify"], timeout=30) as c:
        assert await c.health()
        info = await c.server_info()
        assert info["version"] == "0.5.12"
    async with httpx.AsyncClient(timeout=10) as plain:  # http to an https port gets no answer
        with pytest.raises(httpx.HTTPError):
            await plain.get(f"http://127.0.0.1:{srv.port}/health")
    async with SGLangClient(opts["base_url"], timeout=10) as c:  # verified: a self-signed certificate is refused
        assert not await c.health(timeout=5)
