"""Storage of the hub, in two products that share two small modules.

The client (`pip install gpu-hub`; imports no Django and nothing of `hub`):

    client/    HTTP client, errors and their errno values, retries, settings, the console handler
    transfer/  pull, push, the transfer engine, the blob cache, locks, the rate limiter, progress
    fs/        the fsspec `hub://` filesystem, the volume API, checkpoints
    mount/     `hub mount`: repos and the volume through FUSE
    cli/       the `hub` command line (`python -m storage.cli`)

The server's side (`pip install 'gpu-hub[server]'`, used by `hub`):

    store/     the object store (a directory or S3) and SigV4 presigning

Shared by both, dependency-free: sizes (parse_size, format_size) and paths (what a repo path may be).
"""
