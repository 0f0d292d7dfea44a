# -*- coding: utf-8 -*-
# Copyright: flodl.cluster contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The collection's files in a shared project: bounded reads, writes that follow no planted link,
the mode of everything written, the run's directories, the launch log as a best-effort copy.
May import: ``_core``.

Entry points:
- ``safe_reads.read_capped_text``: read a regular file, non-blocking, under a size cap
- ``safe_files.atomic_write``: replace a file without following a planted link
- ``safe_files.open_log``: open a log file safely
- ``file_modes.make_dirs``: make directories with their mode, whatever the umask
- ``file_modes.FILE_MODE``: the mode of a file the run writes
- ``project_dirs.write_dir_problems``: the run's write directories checked before contact
- ``project_dirs.make_dirs_under``: make directories one component at a time under a root
- ``logsink.LogSink``: the launch log: a full disk warns once, training goes on
"""
