"""The upload pipeline, above the content store and quotas: plan (dedup, reserve, choose a transfer)
→ parts → complete → verify. Every door that takes bytes (the LFS adapter, the native volume API,
`hub push`'s session status) goes through it."""
