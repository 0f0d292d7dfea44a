# shellcheck shell=bash
# Sourced by bootstrap.sh and install-docker-tools.sh (both also run alone): Debian's packages, asked and
# installed one way. Root only, as both scripts are.

# $1 = package: installed and configured (not merely unpacked or removed with its config kept).
deb_installed() { dpkg-query -W -f='${Status}' "$1" 2>/dev/null | grep -q "install ok installed"; }

# packages...: the package lists fetched once (FLODL_APT_UPDATED, exported: the scripts this one starts skip it too),
# then a quiet install.
apt_install() {
  if [ -z "${FLODL_APT_UPDATED:-}" ]; then
    apt-get update -qq >/dev/null
    export FLODL_APT_UPDATED=1
  fi
  # DEBCONF_NOWARNINGS: no "delaying package configuration, since apt-utils is not installed" on a minimal image
  DEBIAN_FRONTEND=noninteractive DEBCONF_NOWARNINGS=yes \
    apt-get install -y -qq --no-install-recommends "$@" >/dev/null
}
