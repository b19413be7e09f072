"""Moving bytes between the hub and local disk.

    engine     the transfer engine: parallel, resumable, verified downloads and uploads
    pull       repo snapshots into the huggingface_hub cache or a local folder
    push       a folder committed to a repo
    blobcache  the shared content-addressed cache of blobs (mounts and pulls)
    locks      the inter-process file lock (flock, as huggingface_hub takes it) both take
    ratelimit  the one token bucket behind every --limit-rate
    progress   the one progress-bar wrapper
"""
