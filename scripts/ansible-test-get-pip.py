"""Offline stand-in for the get-pip script ansible-test downloads.

ansible-test bootstraps pip in each of its sanity venvs with a script fetched from a host this machine
cannot reach. This one does the same job: it installs the pip version asked for into the venv, with uv
when scripts/sanity.sh put it on PATH (about 1 CPU-second a venv), else with the standard library's
ensurepip and then pip itself (about 9: a cold run makes 9 venvs per ansible-core line, bench/README.md
"Stop 39"). scripts/sanity.sh places it in ansible-test's cache under the name ansible-test looks for.
"""
import ensurepip
import os
import shutil
import subprocess
import sys

# get-pip specific switches that `pip install` does not know.
GET_PIP_ONLY = {"--no-setuptools", "--no-wheel"}
# Where pip reads it first: what `pip install` would take, from the environment, then [install], then [global].
EXTRA_INDEX_KEYS = (":env:.extra-index-url", "install.extra-index-url", "global.extra-index-url")


def pip_config() -> dict:
    """The machine's pip settings as `pip config list` shows them (key -> value)."""
    listed = subprocess.run([sys.executable, "-m", "pip", "config", "list"],
                            capture_output=True, text=True, check=False).stdout
    found = {}
    for line in listed.splitlines():
        key, sep, value = line.partition("=")
        if sep:
            found[key] = value.strip("'\"")
    return found


def without_file_indexes(config: dict) -> str:
    """The extra indexes pip would use, less the file:// ones."""
    extra = next((config[k] for k in EXTRA_INDEX_KEYS if k in config), "")
    return " ".join(url for url in extra.split() if not url.startswith("file:"))


def with_uv(uv: str, args: list) -> int:
    """The packages ``args`` names (ansible-test asks for ``pip==X`` alone) installed by uv, byte-compiled as pip
    would. uv reads no pip.conf (it asks PyPI) and takes the machine's certificates with UV_NATIVE_TLS."""
    packages = [a for a in args if not a.startswith("-")]
    env = dict(os.environ, UV_NATIVE_TLS="true", UV_LINK_MODE="copy")
    return subprocess.call([uv, "pip", "install", "-q", "--compile-bytecode", "--python", sys.executable, *packages],
                           env=env)


def venv_pip_conf() -> None:
    """This venv's own pip.conf, for the pip installs ansible-test makes next.

    pip reads a file:// index one project directory at a time and warns "Location ... is ignored" for each
    project missing there: a partial local mirror in the machine's configuration prints about a hundred such
    lines while ansible-test fills its venvs. This file (read after the user's) keeps the other indexes,
    find-links and certificates as configured; ansible-test passes pip no PIP_* variable to do it with.
    """
    if sys.prefix != sys.base_prefix:  # a venv of ansible-test's, never a system Python
        kept = without_file_indexes(pip_config())
        with open(os.path.join(sys.prefix, "pip.conf"), "w", encoding="utf-8") as conf:
            conf.write(f"[global]\nextra-index-url = {kept}\n[install]\nextra-index-url = {kept}\n")


def main() -> int:
    args = [a for a in sys.argv[1:] if a not in GET_PIP_ONLY]
    uv = shutil.which("uv")
    if uv and with_uv(uv, args) == 0:
        venv_pip_conf()
        return 0
    saved = os.environ.get("PIP_CONFIG_FILE")
    ensurepip.bootstrap(upgrade=True)
    # ensurepip points PIP_CONFIG_FILE at /dev/null for its own run; the real
    # install must see the machine's pip configuration (index, certificates).
    if saved is None:
        os.environ.pop("PIP_CONFIG_FILE", None)
    else:
        os.environ["PIP_CONFIG_FILE"] = saved
    venv_pip_conf()
    return subprocess.call([sys.executable, "-m", "pip", "install", *args])


if __name__ == "__main__":
    sys.exit(main())
