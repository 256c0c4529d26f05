"""The deployment as configured: what `serve --workers` refuses, the nginx configuration it
writes, and the production settings the README gives."""

from __future__ import annotations

import json
import re
import secrets
import shlex
import socket
import string
import subprocess
import sys
import time
import tomllib
from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml
from django.core.management import call_command
from django.core.management.base import CommandError

from serving import nginx
from serving.children import free_port
from tests.conftest import ROOT

NGINX = nginx.find_nginx()


def needs_nginx(test):
    """A test that runs nginx: skipped where it is not installed, and left out of test-fast."""
    return pytest.mark.services(
        pytest.mark.skipif(NGINX is None, reason="nginx is not installed")(test)
    )


def test_several_workers_need_redis(settings):
    settings.REDIS_URL = ""
    with pytest.raises(CommandError, match=r"--workers 2 needs REDIS_URL"):
        call_command("serve", "--workers", "2")


@pytest.mark.filterwarnings("ignore:Overriding setting DATABASES")
def test_several_workers_need_a_database_they_all_open(settings):
    settings.REDIS_URL = "redis://127.0.0.1:6379/0"
    settings.DATABASES = {
        "default": {**settings.DATABASES["default"], "ENGINE": "django.db.backends.sqlite3"}
    }
    settings.DATABASES["default"]["NAME"] = ":memory:"
    with pytest.raises(CommandError, match=r"not an in-memory SQLite"):
        call_command("serve", "--workers", "3")


def test_several_workers_need_nginx(settings, tmp_path):
    settings.REDIS_URL = "redis://127.0.0.1:6379/0"
    settings.PARLEY_NGINX = str(tmp_path / "no-nginx-here")
    with pytest.raises(CommandError, match=r"no-nginx-here was not found"):
        call_command("serve", "--workers", "2")


@pytest.mark.parametrize(
    "entry, why",
    [
        ("proxy.example.com", "is neither an address nor a network"),
        ("10.1.2.3/8", "is neither an address nor a network"),  # 10.0.0.0/8 meant?
        ("0.0.0.0/0", "would trust every address"),
        ("::/0", "would trust every address"),
        ("fe80::1%eth0", "names an interface"),
    ],
)
def test_serve_refuses_a_trusted_proxy_nginx_would_misread(settings, entry, why):
    settings.REDIS_URL = "redis://127.0.0.1:6379/0"
    settings.PARLEY_TRUSTED_PROXIES = ["10.0.0.5", entry]
    with pytest.raises(CommandError, match=re.escape(f"{entry!r} {why}")):
        call_command("serve", "--workers", "2")


def test_a_template_placeholder_without_a_value_is_an_error():
    with pytest.raises(nginx.NginxConfigError, match="PARLEY_NGINX_VAR"):
        nginx.render("nginx.conf.template")


@needs_nginx
@pytest.mark.parametrize("listen", [("127.0.0.1", 8000), ("::", 8080)])
def test_nginx_accepts_the_configuration_serve_writes(tmp_path, listen):
    proxy = nginx.Proxy(
        listen=nginx.address(*listen),
        workers=[nginx.address("127.0.0.1", 8001), nginx.address("127.0.0.1", 8002)],
        static_root=tmp_path / "static",
        var=tmp_path,
        trusted=nginx.trusted_networks(["10.0.0.5", "192.168.0.0/16", "fd00::/8", "::1"]),
    )
    site = proxy.write_config().with_name("parley.conf").read_text()
    assert "server 127.0.0.1:8001; server 127.0.0.1:8002;" in site
    assert f"listen {nginx.address(*listen)};" in site
    # Loopback is trusted already.
    assert "10.0.0.5/32 1; 192.168.0.0/16 1; fd00::/8 1;" in site
    real_ip = ["10.0.0.5/32", "192.168.0.0/16", "fd00::/8"]
    assert " ".join(f"set_real_ip_from {network};" for network in real_ip) in site
    assert "${" not in site
    checked = subprocess.run(proxy.command(NGINX, "-t"), capture_output=True, text=True)
    assert checked.returncode == 0, checked.stderr
    assert "syntax is ok" in checked.stderr


def test_nginx_lets_bodies_just_over_parleys_limit_through_for_parley_to_refuse(tmp_path, settings):
    settings.DATA_UPLOAD_MAX_MEMORY_SIZE = 10_000_000
    proxy = nginx.Proxy(listen="127.0.0.1:8000", workers=[], static_root=tmp_path, var=tmp_path)

    site = proxy.write_config().with_name("parley.conf").read_text()

    assert f"client_max_body_size {10_000_000 + nginx.BODY_SLACK};" in site


@pytest.fixture
def lone_nginx(tmp_path: Path) -> Iterator[str]:
    """serve's nginx with no worker behind it (what it answers itself); its host:port."""
    listen = nginx.address("127.0.0.1", free_port())
    tmp_path.chmod(0o755)  # nginx's workers may run as another user
    proxy = nginx.Proxy(
        listen=listen,
        workers=[nginx.address("127.0.0.1", free_port())],
        static_root=tmp_path,
        var=tmp_path,
    )
    proxy.write_config()
    process = subprocess.Popen(proxy.command(NGINX), stderr=subprocess.PIPE, text=True)
    try:
        deadline = time.monotonic() + 30  # a bound on a hang, not a measure of speed
        while process.poll() is None and time.monotonic() < deadline:
            try:
                socket.create_connection(listen.rsplit(":", 1), timeout=1).close()
                break
            except OSError:
                time.sleep(0.05)
        assert process.poll() is None, process.communicate()[1]
        yield listen
    finally:
        process.terminate()
        process.wait(timeout=30)


def raw_response(listen: str, request: bytes) -> tuple[str, dict[str, str], bytes]:
    """The answer to `request`, read up to the end its Content-Length gives: nginx keeps the
    connection open a while after refusing a body (lingering close), waiting for the rest."""
    host, port = listen.rsplit(":", 1)
    with socket.create_connection((host, int(port)), timeout=30) as sock:
        sock.sendall(request)
        answer = b""
        while chunk := sock.recv(65536):
            answer += chunk
            head, found, body = answer.partition(b"\r\n\r\n")
            length = re.search(rb"(?im)^content-length:\s*(\d+)", head)
            if found and length and len(body) >= int(length[1]):
                break
    head, _, body = answer.partition(b"\r\n\r\n")
    status, *fields = head.decode().split("\r\n")
    headers = {k.lower(): v.strip() for k, _, v in (f.partition(":") for f in fields)}
    return status, headers, body


@needs_nginx
def test_nginx_refuses_a_body_far_over_the_limit_in_json(lone_nginx, settings):
    too_large = nginx.accepted_body_size(settings.DATA_UPLOAD_MAX_MEMORY_SIZE) + 1
    request = (
        f"POST /api/runs HTTP/1.1\r\nHost: {lone_nginx}\r\nContent-Type: application/json\r\n"
        f"Content-Length: {too_large}\r\nConnection: close\r\n\r\n"
    ).encode()

    status, headers, body = raw_response(lone_nginx, request)

    assert status.split()[1] == "413"
    assert headers["content-type"] == "application/json"
    assert json.loads(body) == {"detail": "Request body too large."}


def readme_production_settings() -> dict[str, str]:
    """The variables the README's deployment section exports, a fresh SECRET_KEY for its
    command substitution."""
    readme = (ROOT / "README.md").read_text()
    section = readme[readme.index("## Deploying") :]
    block = section[section.index("```sh") : section.index("```", section.index("```sh") + 5)]
    values = {}
    for line in block.splitlines():
        if line.startswith("export "):
            for word in shlex.split(line.partition("#")[0])[1:]:
                name, _, value = word.partition("=")
                values[name] = secrets.token_urlsafe(50) if value.startswith("$(") else value
    return values


def check_deploy(**env: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "manage.py", "check", "--deploy", "--fail-level", "WARNING"],
        cwd=ROOT,
        env={"PATH": "/usr/bin:/bin", "PYTHONPATH": str(ROOT), **env},
        capture_output=True,
        text=True,
    )


def test_the_readme_production_settings_pass_the_deployment_checks():
    production = readme_production_settings()
    assert production["DEBUG"] == "false" and "REDIS_URL" in production
    checked = check_deploy(**production)
    assert checked.returncode == 0, checked.stderr
    assert "no issues" in checked.stdout


def test_the_deployment_checks_see_through_the_tuned_middleware():
    """Django's checks find the security middleware by dotted path: with the tuned subclasses
    they skipped every check that depends on it, such as HSTS."""
    production = {**readme_production_settings(), "SECURE_HSTS_SECONDS": "0"}
    checked = check_deploy(**production, PARLEY_TUNE_MIDDLEWARE="true")
    assert checked.returncode == 1
    assert re.findall(r"\(security\.W\d+\)", checked.stderr) == ["(security.W004)"]


def test_compose_fills_in_every_placeholder_of_the_nginx_template():
    compose = yaml.safe_load((ROOT / "deploy" / "compose.yaml").read_text())
    front = compose["services"]["nginx"]
    template = string.Template((nginx.TEMPLATES / "parley.conf.template").read_text())
    placeholders = {name for name in template.get_identifiers() if name.startswith("PARLEY_")}
    assert set(front["environment"]) == placeholders
    mounts = dict(volume.split(":")[:2] for volume in front["volumes"])
    # The image fills in templates/*.template into conf.d, default.conf replacing its own site.
    assert mounts["./nginx/parley.conf.template"] == "/etc/nginx/templates/default.conf.template"
    proxy_rules = front["environment"]["PARLEY_NGINX_DIR"] + "/parley-proxy.conf"
    assert mounts["./nginx/parley-proxy.conf"] == proxy_rules
    assert mounts["static"] == front["environment"]["PARLEY_STATIC_ROOT"]
    parley = compose["services"]["parley"]
    assert parley["environment"]["PARLEY_PROXY_HEADERS"] == "true"
    assert "ports" not in parley, "only nginx may reach the processes that trust its headers"
    assert "server parley:8000;" == front["environment"]["PARLEY_UPSTREAM_SERVERS"]
    # Each paces its answers by the load of all of them.
    assert parley["environment"]["PARLEY_WORKERS"] == str(parley["deploy"]["replicas"])


def default_of(compose_value: str) -> int:
    """The default of a compose ${NAME:-default}."""
    match = re.fullmatch(r"\$\{\w+:-(\d+)\}", compose_value)
    assert match, compose_value
    return int(match.group(1))


def test_every_nginx_lets_bodies_just_over_parleys_limit_through():
    """compose.yaml's and the system nginx's site, as serve's own: Parley refuses a body just
    over its limit itself, saying what the limit is."""
    compose = yaml.safe_load((ROOT / "deploy" / "compose.yaml").read_text())
    limit = default_of(compose["services"]["parley"]["environment"]["PARLEY_MAX_REQUEST_BYTES"])
    assert limit == 2_621_440  # the setting's default
    nginx_body = default_of(compose["services"]["nginx"]["environment"]["PARLEY_MAX_BODY_SIZE"])
    assert nginx_body == nginx.accepted_body_size(limit)
    site = (nginx.TEMPLATES / "parley-site.conf").read_text()
    assert f"client_max_body_size {nginx.accepted_body_size(limit)};" in site
    shared = (nginx.TEMPLATES / "parley-proxy.conf").read_text()
    assert not re.search(r"^\s*client_max_body_size", shared, re.MULTILINE)


@needs_nginx
def test_nginx_accepts_the_site_for_a_system_nginx(tmp_path):
    """deploy/nginx/parley-site.conf, with a certificate of the test's and this checkout's
    paths, inside a configuration like Debian's nginx.conf."""
    key, cert = tmp_path / "key.pem", tmp_path / "cert.pem"
    subject = ["-subj", "/CN=chat.example.com", "-keyout", str(key), "-out", str(cert)]
    openssl = ["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "1"]
    subprocess.run([*openssl, *subject], check=True, capture_output=True)
    site = (nginx.TEMPLATES / "parley-site.conf").read_text()
    site = site.replace("/etc/letsencrypt/live/chat.example.com/fullchain.pem", str(cert))
    site = site.replace("/etc/letsencrypt/live/chat.example.com/privkey.pem", str(key))
    site = site.replace("/srv/parley/", f"{ROOT}/")
    (tmp_path / "parley.conf").write_text(site)
    main = nginx.render("nginx.conf.template", PARLEY_NGINX_VAR=str(tmp_path))
    (tmp_path / "nginx.conf").write_text(main)
    proxy = nginx.Proxy(listen="", workers=[], static_root=tmp_path, var=tmp_path)
    checked = subprocess.run(proxy.command(NGINX, "-t"), capture_output=True, text=True)
    assert checked.returncode == 0, checked.stderr


def test_the_image_copies_every_package_pyproject_installs():
    """`pip install .` in the image finds only what was copied: a package left out is missing
    from the image, silently, until Parley starts."""
    include = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"][
        "packages"
    ]["find"]["include"]
    copied = re.findall(r"^COPY (\S+) \1$", (ROOT / "deploy" / "Dockerfile").read_text(), re.M)

    assert {pattern.rstrip("*") for pattern in include} <= set(copied)
