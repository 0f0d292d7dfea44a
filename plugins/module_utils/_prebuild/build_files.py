# -*- coding: utf-8 -*-
# Copyright: flodl.cluster contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The prebuild's files on the build host: linked binaries, the envelope, links out of the checkout."""
from __future__ import annotations

import errno
import os
import stat

from ansible_collections.flodl.cluster.plugins.module_utils._files.file_modes import (
    DIR_MODE,
    FILE_MODE,
    make_dirs,
    without_loose_bits,
)
from ansible_collections.flodl.cluster.plugins.module_utils._run.prebuild import PrebuildPlan
from ansible_collections.flodl.cluster.plugins.module_utils._files.project_dirs import link_escape_problem
from ansible_collections.flodl.cluster.plugins.module_utils._files.safe_files import atomic_write, temp_name
from ansible_collections.flodl.cluster.plugins.module_utils._files.safe_reads import ENVELOPE_MAX, read_capped_text


def link_binary(source: str, dest: str) -> bool:
    """Make ``dest`` the same file as ``source`` (hard link, else copy); True when it changed."""
    if os.path.exists(dest):
        if os.path.samefile(source, dest):
            return False
        s, d = os.stat(source), os.stat(dest)
        if s.st_dev != d.st_dev and (s.st_size, s.st_mtime_ns) == (d.st_size, d.st_mtime_ns):
            return False
    directory, name = os.path.split(dest)
    make_dirs(directory, DIR_MODE)
    if os.path.islink(dest):
        raise OSError(errno.ELOOP, f"{dest} is a symbolic link; remove it (and check who planted it), then run again")
    # link() never follows or overwrites; the name is unpredictable so nobody can plant it first.
    tmp = os.path.join(directory, temp_name(name))
    try:
        os.link(source, tmp)
    except OSError as exc:
        if exc.errno not in (errno.EXDEV, errno.EPERM, errno.ENOTSUP, errno.EMLINK, errno.EACCES):
            raise
        with open(source, "rb") as src:
            atomic_write(directory, name, src, without_loose_bits(stat.S_IMODE(os.stat(source).st_mode)))
        return True
    os.replace(tmp, dest)
    return True


def take_envelope(envelope_file: str) -> str | None:
    """The previous envelope's text (None when there was none); the file is removed until every build passed."""
    if not envelope_file:
        return None
    try:
        previous = read_capped_text(envelope_file, ENVELOPE_MAX, follow=False)
    except (OSError, UnicodeDecodeError):
        previous = None  # a FIFO or a huge file is not read: it is removed like any envelope
    _remove(envelope_file)
    return previous


def link_escapes(plan: PrebuildPlan, envelope_file: str) -> list[str]:
    """The directories the builds would create under a link out of their root (target dirs: the checkout)."""
    checkout = plan.project_dir or plan.project_root
    found = [link_escape_problem(checkout, t.target_rel) for t in plan.targets if t.target_rel]
    if envelope_file:
        directory = os.path.dirname(envelope_file)
        root = checkout.rstrip("/") or "/"  # the envelope lives beside the target dirs
        if directory.startswith(root + "/"):
            found.append(link_escape_problem(root, directory[len(root) + 1:]))
    return list(dict.fromkeys(p for p in found if p))


def _remove(path: str) -> None:
    try:
        os.unlink(path)
    except (FileNotFoundError, NotADirectoryError):
        pass  # nothing there (a parent that is a file holds nothing): the write reports that parent


def write_text(path: str, text: str) -> None:
    directory, name = os.path.split(os.path.abspath(path))
    make_dirs(directory, DIR_MODE)
    atomic_write(directory, name, text, FILE_MODE)
