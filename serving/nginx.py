"""nginx in front of `serve --workers N`: its configuration, filled in from the templates in
deploy/nginx, and the command that runs it unprivileged, in the foreground, as a child of serve.
"""

from __future__ import annotations

import ipaddress
import os
import pwd
import shutil
import string
from dataclasses import dataclass
from pathlib import Path

from django.conf import settings

TEMPLATES = Path(__file__).resolve().parent.parent / "deploy" / "nginx"
# Debian's; /usr/sbin is often missing from an unprivileged user's PATH.
SEARCH_PATH = "/usr/sbin:/usr/local/sbin:/usr/local/nginx/sbin"
# nginx lets bodies this much over PARLEY_MAX_REQUEST_BYTES through, for Parley to refuse with
# its own answer (JSON on the API) that names the limit; larger ones nginx refuses itself.
BODY_SLACK = 1_048_576
# Who nginx's workers run as when its master runs as root (its default; nothing sets another).
WORKERS_USER = "nobody"


class NginxConfigError(ValueError):
    pass


def find_nginx(configured: str = "") -> str | None:
    """The nginx configured (a path, or a name to look up), else the one on PATH or Debian's."""
    return shutil.which(configured or "nginx", path=f"{os.environ.get('PATH', '')}:{SEARCH_PATH}")


def accepted_body_size(limit: int | None) -> int:
    """nginx's client_max_body_size in front of Parley refusing bodies over `limit`; 0, nginx's
    "no limit", when Parley has none."""
    return 0 if limit is None else limit + BODY_SLACK


def let_in(directory: Path) -> None:
    """Let nginx's workers into `directory`, and no other user: mode 0700, its own. Started as
    root, they run as another user (nobody, nginx's default): the directory is then root's and
    their group's, which may pass through it (0710) but not change what is in it."""
    directory.chmod(0o700)
    if os.geteuid() != 0:
        return
    try:
        group = pwd.getpwnam(WORKERS_USER).pw_gid
    except KeyError:
        raise NginxConfigError(f"there is no user {WORKERS_USER} for nginx's workers") from None
    os.chown(directory, 0, group)
    directory.chmod(0o710)


# Trusted by the template itself: nginx warns of a network given twice.
ALWAYS_TRUSTED = ("127.0.0.1/32", "::1/128")


def trusted_networks(entries: list[str]) -> tuple[str, ...]:
    """PARLEY_TRUSTED_PROXIES, each an address or a network as nginx reads it; those the
    template trusts anyway left out."""
    found = (str(_trusted_network(entry)) for entry in entries)
    return tuple(network for network in found if network not in ALWAYS_TRUSTED)


def _trusted_network(entry: str) -> ipaddress.IPv4Network | ipaddress.IPv6Network:
    def refused(why: str) -> NginxConfigError:
        return NginxConfigError(f"PARLEY_TRUSTED_PROXIES: {entry!r} {why}")

    if "%" in entry:  # a scope (fe80::1%eth0): nginx takes none
        raise refused("names an interface; give the address alone")
    try:
        network = ipaddress.ip_network(entry)
    except ValueError:
        raise refused("is neither an address nor a network (10.0.0.0/8)") from None
    if network.prefixlen == 0:  # every client could then say who it is
        raise refused("would trust every address")
    return network


def address(host: str, port: int) -> str:
    """host:port as nginx's `listen` and `server` take it, an IPv6 host in brackets."""
    host = host.strip("[]")
    return f"[{host}]:{port}" if ":" in host else f"{host}:{port}"


@dataclass
class Proxy:
    """nginx listening on `listen` (host:port), in front of the daphne processes at `workers`."""

    listen: str
    workers: list[str]
    static_root: Path
    var: Path  # where this nginx keeps its pid, temporary files and configuration
    # Proxies besides loopback trusted to say who the client is (trusted_networks).
    trusted: tuple[str, ...] = ()

    def write_config(self) -> Path:
        """Both files filled in under `var`; the main one's path."""
        servers = " ".join(f"server {worker};" for worker in self.workers)
        site = render(
            "parley.conf.template",
            PARLEY_LISTEN=self.listen,
            PARLEY_UPSTREAM_SERVERS=servers,
            PARLEY_STATIC_ROOT=str(self.static_root).rstrip("/"),
            PARLEY_MAX_BODY_SIZE=str(accepted_body_size(settings.DATA_UPLOAD_MAX_MEMORY_SIZE)),
            PARLEY_NGINX_DIR=str(TEMPLATES),
            PARLEY_TRUSTED_GEO=" ".join(f"{network} 1;" for network in self.trusted),
            PARLEY_TRUSTED_REAL_IP=" ".join(f"set_real_ip_from {n};" for n in self.trusted),
        )
        main = render("nginx.conf.template", PARLEY_NGINX_VAR=str(self.var))
        (self.var / "parley.conf").write_text(site)
        (self.var / "nginx.conf").write_text(main)
        return self.var / "nginx.conf"

    def command(self, nginx: str, *options: str) -> list[str]:
        """nginx on this configuration, in the foreground; `-t` among `options` only checks it."""
        files = ["-p", str(self.var), "-c", str(self.var / "nginx.conf"), "-e", "stderr"]
        return [nginx, *files, "-g", "daemon off;", *options]


def render(template: str, **values: str) -> str:
    """A template of deploy/nginx with its ${PARLEY_...} placeholders filled in; nginx's own
    $variables are left alone. A placeholder without a value is an error, not an empty line."""
    text = string.Template((TEMPLATES / template).read_text()).safe_substitute(values)
    missing = string.Template(text).get_identifiers()
    unfilled = sorted(name for name in missing if name.startswith("PARLEY_"))
    if unfilled:
        raise NginxConfigError(f"{template}: no value for {', '.join(unfilled)}")
    return text
