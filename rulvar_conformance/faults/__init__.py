"""Faults beyond process death: power loss and disk faults (CONTRACT W, E), and
partitions and server crashes of PostgreSQL under the soak (S13, S14: ``soak``,
``chaos``, ``judge``, ``netns``, ``proxy``, ``pg_cluster``, ``profiles``)."""
