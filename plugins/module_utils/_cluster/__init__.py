# -*- coding: utf-8 -*-
# Copyright: flodl.cluster contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""flodl's ``cluster:`` block: the one validator and its field and worker rules, the topology from
inventory variables, the run's typed cluster, ranks, libtorch variants, name resolution and lookups.
May import: ``_core``.

Entry points:
- ``topology.cluster_from_inventory``: inventory variables to the cluster dict
- ``topology.TopologyError``: a cluster that cannot be built or launched
- ``model.cluster_model``: the validated cluster dict to the run's typed, frozen ``Cluster``
- ``model.Cluster``: the run's cluster (``Controller``, ``Worker``); its document only for the renderers
- ``validate.cluster_findings``: every problem of a cluster block, each with its worker and variable
- ``validate.cluster_problems``: the same problems as text (fdl files)
- ``cluster_ranks.populate_ranks``: number the ranks in worker order
- ``cluster_ranks.device_count``: how many ranks a worker gives (its devices, or its counted GPUs)
- ``variants.variant_feature``: the cargo feature of a libtorch variant
- ``name_resolution.Resolver``: the resolver type: a name to its addresses
- ``lookups.start_lookups``: look up every name of the run at once, one bounded wait
- ``field_checks.kind``: what a value is, for messages, never the value
"""
