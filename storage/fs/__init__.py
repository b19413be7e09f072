"""The hub as files: the fsspec `hub://` filesystem (hubfs), the volume's API (volume), and
checkpoints that survive the instance (checkpoint)."""
