"""Images and a compose stack for the container test (tests/docker/test_stack.py, docs/container.md).

No image registry is reachable on this project's machines, while Debian's packages and PyPI are. So
everything is built here, each image tagged by the SHA-256 of what goes into it (a second run finds
the tag and builds nothing):

* the base: Debian bookworm by ``docker/debootstrap-base.sh`` (debootstrap, ``docker import``), for the
  Dockerfile's ``BASE_IMAGE`` (a team's default is ``python:3.11-slim-bookworm``);
* the wheelhouse ``docker/wheels/`` (git-ignored): ``pip wheel`` on the host of requirements.txt,
  setuptools (the project's build backend) and the S3 stand-in's moto and Flask, by an interpreter of
  the base's Python version (a container here reaches PyPI only through this machine's TLS-intercepting
  egress, whose certificate authority no image should trust); the image installs from it with
  ``WHEELS=1`` (``--no-index``);
* the stand-ins for compose.yaml's public ``db`` and ``s3`` images (docker/standins/) and the image of
  the Dockerfile.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import re
import shutil
import socket
import subprocess
import time
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from tests.helpers.env import REPO

DOCKER_DIR = REPO / "docker"
WHEELS = DOCKER_DIR / "wheels"
#: What the S3 stand-in installs from the wheelhouse besides the product's requirements.
STANDIN_REQUIREMENTS = ("setuptools>=77", "moto[s3]", "flask", "flask-cors")
#: The app image's inputs (besides the base and the wheelhouse): what the Dockerfile copies.
APP_INPUTS = (
    "Dockerfile",
    ".dockerignore",
    "requirements.txt",
    "pyproject.toml",
    "README.md",
    "app.py",
    ".streamlit",
    "pages",
    "knowledge",
    "docker/entrypoint.sh",
    "docker/healthcheck.py",
    "docker/init.py",
)
#: Tag prefix of every image the test builds.
PREFIX = "knowledge-test"


class Unavailable(Exception):
    """Something the container test needs is not on this machine (the message says what)."""


def run(args: Sequence[str], *, timeout: float = 900, env: dict[str, str] | None = None, check: bool = True) -> str:
    """Run ``args`` at the lowest CPU priority (``nice -n 19``: builds must not starve the tests that
    run beside this one, a browser's above all); its standard output. Raises ``AssertionError`` with
    the output when it fails."""
    niced = ["nice", "-n", "19", *args] if shutil.which("nice") else list(args)
    done = subprocess.run(niced, capture_output=True, text=True, timeout=timeout, env=env, check=False)
    if check and done.returncode != 0:
        raise AssertionError(f"{' '.join(args)} exited {done.returncode}:\n{done.stdout[-4000:]}\n{done.stderr[-4000:]}")
    return done.stdout


def digest(*parts: str | bytes | Path, root: Path = REPO) -> str:
    """12 hex digits of the SHA-256 of ``parts``: strings and bytes as they are; a path (relative to
    ``root``) by its name and content, a folder by every file under it (``__pycache__`` left out)."""
    h = hashlib.sha256()
    for part in parts:
        if isinstance(part, Path):
            path = root / part
            files = (
                sorted(p for p in path.rglob("*") if p.is_file() and "__pycache__" not in p.parts)
                if path.is_dir()
                else [path]
            )
            for f in files:
                h.update(str(f.relative_to(root)).encode() + b"\0" + f.read_bytes() + b"\0")
        else:
            h.update(part if isinstance(part, bytes) else part.encode())
            h.update(b"\0")
    return h.hexdigest()[:12]


def compose_command() -> list[str]:
    """``docker compose`` (Compose v2) when the CLI has it, else ``docker-compose`` (v1, Debian bookworm's)."""
    if (
        shutil.which("docker")
        and subprocess.run(["docker", "compose", "version"], capture_output=True, check=False).returncode == 0
    ):
        return ["docker", "compose"]
    if shutil.which("docker-compose"):
        return ["docker-compose"]
    raise Unavailable("neither `docker compose` nor `docker-compose` is installed")


def check_tools() -> list[str]:
    """The compose command, once docker (a daemon that answers), compose and debootstrap (as root) are
    found to be there. Raises :class:`Unavailable` saying what is missing."""
    if not shutil.which("docker"):
        raise Unavailable("docker is not installed (Debian: apt-get install docker.io)")
    if subprocess.run(["docker", "info"], capture_output=True, check=False, timeout=60).returncode != 0:
        raise Unavailable("the docker daemon does not answer (start dockerd)")
    compose = compose_command()
    if not (shutil.which("debootstrap") or Path("/usr/sbin/debootstrap").exists()):
        raise Unavailable("debootstrap is not installed (Debian: apt-get install debootstrap)")
    if os.geteuid() != 0:
        raise Unavailable("debootstrap needs root")
    return compose


def image_exists(tag: str) -> bool:
    return subprocess.run(["docker", "image", "inspect", tag], capture_output=True, check=False).returncode == 0


# -- the images ------------------------------------------------------------------------------------
def base_image() -> str:
    """The Debian bookworm base (docker/debootstrap-base.sh), built when its tag is missing."""
    tag = f"{PREFIX}/base:bookworm-{digest(Path('docker/debootstrap-base.sh'))}"
    if not image_exists(tag):
        env = {**os.environ, "PATH": os.environ.get("PATH", "") + ":/usr/sbin:/sbin"}
        run(["sh", str(DOCKER_DIR / "debootstrap-base.sh"), tag], timeout=1200, env=env)
    return tag


def python_version(image: str) -> str:
    """The version of ``python3`` in ``image`` (``3.11.2``)."""
    return run(
        [
            "docker",
            "run",
            "--rm",
            "--network",
            "none",
            image,
            "python3",
            "-c",
            "import platform; print(platform.python_version())",
        ]
    ).strip()


def wheel_interpreter(version: str, candidates: Iterable[str] = ("/usr/bin/python3", "python3", "python3.11")) -> str:
    """An interpreter of the host whose version is ``version`` and that has pip: what the wheelhouse is
    resolved with, so that every wheel installs on the base (a package may require a newer 3.11.x)."""
    for name in candidates:
        exe = shutil.which(name)
        if not exe:
            continue
        probe = subprocess.run(
            [exe, "-c", "import platform, pip; print(platform.python_version())"],
            capture_output=True,
            text=True,
            check=False,
        )
        if probe.returncode == 0 and probe.stdout.strip() == version:
            return exe
    raise Unavailable(f"no Python {version} with pip on this machine to make the wheelhouse with (Debian: python3-pip)")


def wheelhouse(version: str) -> str:
    """Fill docker/wheels/ for Python ``version`` when its stamp (the requirements' digest) is not there;
    the stamp."""
    stamp = digest(Path("requirements.txt"), version, *STANDIN_REQUIREMENTS)
    marker = WHEELS / ".stamp"
    if marker.is_file() and marker.read_text().strip() == stamp and any(WHEELS.glob("*.whl")):
        return stamp
    exe = wheel_interpreter(version)
    for old in WHEELS.glob("*.whl"):
        old.unlink()
    requirements = WHEELS / ".requirements.txt"
    requirements.write_text(
        "".join(
            line for line in (REPO / "requirements.txt").read_text().splitlines(keepends=True) if not line.startswith("-e ")
        )
    )
    run(
        [exe, "-m", "pip", "wheel", "--quiet", "--wheel-dir", str(WHEELS), "-r", str(requirements), *STANDIN_REQUIREMENTS],
        timeout=1800,
    )
    marker.write_text(stamp + "\n")
    return stamp


def wheel_names() -> str:
    return "\n".join(sorted(p.name for p in WHEELS.glob("*.whl")))


def standin_image(name: str, base: str) -> str:
    """The stand-in ``postgres`` or ``s3`` image (docker/standins/), built when its tag is missing."""
    dockerfile = Path(f"docker/standins/{name}.Dockerfile")
    inputs = sorted(p.relative_to(REPO) for p in (DOCKER_DIR / "standins").glob(f"{name}*"))  # its Dockerfile and files
    tag = f"{PREFIX}/{name}:{digest(base, wheel_names(), *inputs)}"
    if not image_exists(tag):
        run(
            [
                "docker",
                "build",
                "-q",
                "-f",
                str(REPO / dockerfile),
                "--build-arg",
                f"BASE_IMAGE={base}",
                "-t",
                tag,
                str(DOCKER_DIR),
            ]
        )
    return tag


def app_image(base: str) -> str:
    """The Dockerfile's image, from the wheelhouse (``WHEELS=1``), built when its tag is missing."""
    tag = f"{PREFIX}/app:{digest(base, wheel_names(), *(Path(p) for p in APP_INPUTS))}"
    if not image_exists(tag):
        run(
            ["docker", "build", "-q", "--build-arg", f"BASE_IMAGE={base}", "--build-arg", "WHEELS=1", "-t", tag, str(REPO)],
            timeout=1800,
        )
    return tag


# -- the stack -------------------------------------------------------------------------------------
def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@dataclass
class Stack:
    """compose.yaml run as the project ``name`` with the variables of ``env_file``."""

    compose: list[str]
    name: str
    env_file: Path
    api_port: int
    app_port: int
    #: the anonymous volumes (the app, API and workers' /data) each `down` without -v leaves behind
    anonymous: set[str] = field(default_factory=set)

    def __call__(self, *args: str, timeout: float = 600) -> str:
        env = {k: v for k, v in os.environ.items() if not k.upper().startswith("KNOWLEDGE_")}
        cmd = [*self.compose, "-f", str(REPO / "compose.yaml"), "--env-file", str(self.env_file), "-p", self.name, *args]
        return run(cmd, timeout=timeout, env=env)

    def containers(self) -> list[dict]:
        """``docker inspect`` of the project's containers (running or not)."""
        ids = run(["docker", "ps", "-aq", "--filter", f"label=com.docker.compose.project={self.name}"]).split()
        return json.loads(run(["docker", "inspect", *ids])) if ids else []

    def service(self, container: dict) -> str:
        return str(container["Config"]["Labels"].get("com.docker.compose.service", "?"))

    def wait_healthy(self, timeout: float = 600) -> float:
        """Wait until every service is healthy and ``init`` has exited 0; the seconds it took. Raises
        ``AssertionError`` with the states and the logs when that does not happen in ``timeout`` s."""
        start = time.monotonic()
        while True:
            containers = self.containers()
            states = {}
            for c in containers:
                state = c["State"]
                states[f"{self.service(c)} {c['Name']}"] = (
                    f"exited {state['ExitCode']}"
                    if state["Status"] == "exited"
                    else state.get("Health", {}).get("Status", state["Status"])
                )
            inits = [s for k, s in states.items() if k.startswith("init ")]
            others = [s for k, s in states.items() if not k.startswith("init ")]
            if inits == ["exited 0"] and others and all(s == "healthy" for s in others):
                return time.monotonic() - start
            failed = [k for k, s in states.items() if (s.startswith("exited") and s != "exited 0") or s == "unhealthy"]
            if failed or time.monotonic() - start > timeout:
                raise AssertionError(
                    f"the stack did not come up ({states}):\n{self('logs', '--no-color', '--tail', '60')[-12000:]}"
                )
            time.sleep(2)

    def remember_volumes(self) -> None:
        """Note the anonymous volumes of the running containers (for :meth:`cleanup`)."""
        for c in self.containers():
            for mount in c.get("Mounts", []):
                if mount.get("Type") == "volume" and not mount.get("Name", "").startswith(f"{self.name}_"):
                    self.anonymous.add(mount["Name"])

    def cleanup(self) -> None:
        """Down with the volumes, and the anonymous volumes earlier downs left; the images stay (the cache)."""
        with contextlib.suppress(AssertionError, subprocess.TimeoutExpired):
            self.remember_volumes()
            self("down", "-v", "--remove-orphans", timeout=300)
        for volume in sorted(self.anonymous):
            subprocess.run(["docker", "volume", "rm", "-f", volume], capture_output=True, check=False)


def stack_env(path: Path, *, app: str, db: str, s3: str, api_port: int, app_port: int) -> dict[str, str]:
    """Write the stack's env file at ``path`` (fresh secrets; the images; ports on loopback); its values."""
    values = {
        "KNOWLEDGE_API_KEY": os.urandom(16).hex(),
        "KNOWLEDGE_SECRET_KEY": os.urandom(16).hex(),
        "POSTGRES_PASSWORD": os.urandom(12).hex(),
        "DB_PASSWORD": os.urandom(12).hex(),
        "S3_ACCESS_KEY": "knowledge-test",
        "S3_SECRET_KEY": os.urandom(12).hex(),
        "APP_IMAGE": app,
        "DB_IMAGE": db,
        "S3_IMAGE": s3,
        "PUBLISH_ADDRESS": "127.0.0.1",
        "API_PORT": str(api_port),
        "APP_PORT": str(app_port),
    }
    path.write_text("".join(f"{k}={v}\n" for k, v in values.items()))
    return values


@contextlib.contextmanager
def timed(timings: dict[str, float], name: str) -> Iterator[None]:
    start = time.monotonic()
    try:
        yield
    finally:
        timings[name] = round(time.monotonic() - start, 1)


def project_name() -> str:
    """A compose project name of this run's own (lower-case letters, digits, dashes)."""
    return re.sub(r"[^a-z0-9-]", "", f"kntest-{os.getpid()}-{os.urandom(3).hex()}")
