"""Test certificates made with the ``openssl`` CLI, and a TLS-only ``redis-server``.

:func:`make_certs` writes a throwaway CA, a server certificate for ``localhost`` / ``127.0.0.1``
and a client certificate, all signed by that CA. :class:`TLSRedisServer` serves only TLS
(``--port 0``), requires client certificates, and gives a ``rediss://`` URL that carries the CA
and client certificate as query parameters::

    with TLSRedisServer(make_certs(tmp_path)) as server:
        async with Client(server.url) as client: ...
"""

from __future__ import annotations

import shutil
import ssl
import subprocess
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import urlencode

from asyncq._testing.redis_server import HOST, RedisServer, answers

__all__ = ["TLSFiles", "TLSRedisServer", "make_certs"]


@dataclass(frozen=True, slots=True)
class TLSFiles:
    """PEM files of a test PKI."""

    ca_cert: Path
    server_cert: Path
    server_key: Path
    client_cert: Path
    client_key: Path

    def client_params(self) -> dict[str, str]:
        """The query parameters (and ConnectionOptions fields) of a client of this PKI."""
        return {"ssl_ca_certs": str(self.ca_cert), "ssl_certfile": str(self.client_cert),
                "ssl_keyfile": str(self.client_key)}

    def client_context(self) -> ssl.SSLContext:
        context = ssl.create_default_context(cafile=str(self.ca_cert))
        context.load_cert_chain(str(self.client_cert), str(self.client_key))
        return context


def _openssl(*args: str, cwd: Path) -> None:
    binary = shutil.which("openssl")
    if binary is None:
        raise RuntimeError("openssl not found; install it (apt-get install openssl)")
    proc = subprocess.run([binary, *args], cwd=cwd, capture_output=True, check=False,
                          stdin=subprocess.DEVNULL, timeout=30)
    if proc.returncode != 0:
        raise RuntimeError(f"openssl {' '.join(args)} failed:\n"
                           + proc.stderr.decode(errors="replace"))


def _key(name: str, cwd: Path) -> None:
    _openssl("genpkey", "-algorithm", "EC", "-pkeyopt", "ec_paramgen_curve:P-256",
             "-out", name, cwd=cwd)


def _signed(name: str, subject: str, extensions: Sequence[str], cwd: Path) -> None:
    _key(f"{name}.key", cwd)
    _openssl("req", "-new", "-key", f"{name}.key", "-subj", subject, "-out", f"{name}.csr",
             cwd=cwd)
    (cwd / f"{name}.ext").write_text("\n".join(extensions) + "\n")
    _openssl("x509", "-req", "-in", f"{name}.csr", "-CA", "ca.crt", "-CAkey", "ca.key",
             "-CAcreateserial", "-days", "2", "-sha256", "-extfile", f"{name}.ext",
             "-out", f"{name}.crt", cwd=cwd)


def make_certs(directory: Path | str, *,
               server_names: Sequence[str] = ("DNS:localhost", "IP:127.0.0.1")) -> TLSFiles:
    """Write a CA, a server certificate (``server_names`` as subjectAltName) and a client
    certificate into ``directory``."""
    cwd = Path(directory)
    cwd.mkdir(parents=True, exist_ok=True)
    _key("ca.key", cwd)
    _openssl("req", "-x509", "-new", "-key", "ca.key", "-sha256", "-days", "2",
             "-subj", "/CN=asyncq test CA", "-addext", "basicConstraints=critical,CA:TRUE",
             "-addext", "keyUsage=critical,keyCertSign,cRLSign", "-out", "ca.crt", cwd=cwd)
    _signed("server", "/CN=localhost", [
        f"subjectAltName={','.join(server_names)}", "extendedKeyUsage=serverAuth",
        "keyUsage=critical,digitalSignature,keyEncipherment"], cwd)
    _signed("client", "/CN=asyncq test client", [
        "extendedKeyUsage=clientAuth", "keyUsage=critical,digitalSignature,keyEncipherment"],
        cwd)
    return TLSFiles(ca_cert=cwd / "ca.crt", server_cert=cwd / "server.crt",
                    server_key=cwd / "server.key", client_cert=cwd / "client.crt",
                    client_key=cwd / "client.key")


class TLSRedisServer(RedisServer):
    """A ``redis-server`` that speaks TLS only (``--port 0 --tls-port``) and requires a client
    certificate signed by the test CA."""

    def __init__(self, files: TLSFiles, extra_args: Sequence[str] = (), *,
                 port: int | None = None) -> None:
        self.files = files
        super().__init__([
            "--port", "0", "--tls-port", "{port}",
            "--tls-cert-file", str(files.server_cert), "--tls-key-file", str(files.server_key),
            "--tls-ca-cert-file", str(files.ca_cert), "--tls-auth-clients", "yes",
            *extra_args,
        ], port=port)

    def args(self) -> list[str]:
        return [str(self.port) if a == "{port}" else a for a in super().args()]

    @property
    def url(self) -> str:
        return f"rediss://{HOST}:{self.port}/0?{urlencode(self.files.client_params())}"

    def _ready(self, pid: int) -> bool:
        return answers(HOST, self.port, pid, ssl_context=self.files.client_context())
