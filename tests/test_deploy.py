"""The deployment as configured: what `serve --workers` refuses, the nginx configuration it
writes, and the production settings the README gives."""

from __future__ import annotations

import re
import secrets
import shlex
import string
import subprocess
import sys

import pytest
import yaml
from django.core.management import call_command
from django.core.management.base import CommandError

from project import nginx
from tests.conftest import ROOT

NGINX = nginx.find_nginx()
needs_nginx = pytest.mark.skipif(NGINX is None, reason="nginx is not installed")


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
    )
    site = proxy.write_config().with_name("parley.conf").read_text()
    assert "server 127.0.0.1:8001; server 127.0.0.1:8002;" in site
    assert f"listen {nginx.address(*listen)};" in site
    assert "${" not in site
    checked = subprocess.run(proxy.command(NGINX, "-t"), capture_output=True, text=True)
    assert checked.returncode == 0, checked.stderr
    assert "syntax is ok" in checked.stderr


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
