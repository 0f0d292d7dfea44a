"""Offline stand-in for the get-pip script ansible-test downloads.

ansible-test bootstraps pip in its sanity venvs with a script fetched from
a host this machine cannot reach. This one does the same job with the
standard library's ensurepip, then installs the requested pip version from
the package index the machine does reach. scripts/test.sh places it in
ansible-test's cache under the name ansible-test looks for.
"""
import ensurepip
import os
import subprocess
import sys

# get-pip specific switches that `pip install` does not know.
GET_PIP_ONLY = {"--no-setuptools", "--no-wheel"}

saved = os.environ.get("PIP_CONFIG_FILE")
ensurepip.bootstrap(upgrade=True)
# ensurepip points PIP_CONFIG_FILE at /dev/null for its own run; the real
# install must see the machine's pip configuration (index, certificates).
if saved is None:
    os.environ.pop("PIP_CONFIG_FILE", None)
else:
    os.environ["PIP_CONFIG_FILE"] = saved
args = [a for a in sys.argv[1:] if a not in GET_PIP_ONLY]
sys.exit(subprocess.call([sys.executable, "-m", "pip", "install", *args]))
