"""Offline stand-in for the get-pip script ansible-test downloads.

ansible-test bootstraps pip in its sanity venvs with a script fetched from
a host this machine cannot reach. This one does the same job with the
standard library's ensurepip, then installs the requested pip version from
the package index the machine does reach. scripts/sanity.sh places it in
ansible-test's cache under the name ansible-test looks for.
"""
import ensurepip
import os
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


saved = os.environ.get("PIP_CONFIG_FILE")
ensurepip.bootstrap(upgrade=True)
# ensurepip points PIP_CONFIG_FILE at /dev/null for its own run; the real
# install must see the machine's pip configuration (index, certificates).
if saved is None:
    os.environ.pop("PIP_CONFIG_FILE", None)
else:
    os.environ["PIP_CONFIG_FILE"] = saved
# pip reads a file:// index one project directory at a time and warns "Location ... is ignored" for each
# project missing there: a partial local mirror in the machine's configuration prints about a hundred such
# lines while ansible-test fills its venvs. This venv's own pip.conf (read after the user's) keeps the other
# indexes, find-links and certificates as configured; ansible-test passes pip no PIP_* variable to do it with.
if sys.prefix != sys.base_prefix:  # a venv of ansible-test's, never a system Python
    kept = without_file_indexes(pip_config())
    with open(os.path.join(sys.prefix, "pip.conf"), "w", encoding="utf-8") as conf:
        conf.write(f"[global]\nextra-index-url = {kept}\n[install]\nextra-index-url = {kept}\n")
args = [a for a in sys.argv[1:] if a not in GET_PIP_ONLY]
sys.exit(subprocess.call([sys.executable, "-m", "pip", "install", *args]))
