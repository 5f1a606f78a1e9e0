"""The end-to-end audit: every record counted per topic, source datacenter and hour at each
stage (the source cluster, the mirror's checkpoints, the aggregate cluster, Hadoop), the stages
compared, and each difference explained where it can be (``tributary audit``)."""
