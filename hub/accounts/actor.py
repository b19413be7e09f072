"""Who is calling, as every door (the HF API, the native API, the pages, the admin, tasks) hands it
to the domain: the user, what their credential allows, and — for an instance's token — the repos
that instance may read. Built once per request from what the authentication middlewares found, so
no domain module has to look anything up about the credential itself."""
from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Actor:
    user: object | None
    # May change repos, discussions, mirrors, … (not with a read-only token, nor an instance's).
    can_write: bool = True
    # An instance's token reads only the repos attached to the instance (their pks); None otherwise.
    instance_repos: frozenset | None = None
    # May change the user's own volume: every credential but a read-only token (an instance shares
    # its owner's volume: that is where training checkpoints go).
    can_write_volume: bool = True

    @property
    def on_instance(self) -> bool:
        return self.instance_repos is not None

    def may_read_attached(self, repo) -> bool:
        """False only for an instance's token and a repo not attached to the instance."""
        return self.instance_repos is None or repo.pk in self.instance_repos

    @classmethod
    def from_request(cls, request) -> Actor:
        cached = getattr(request, "_hub_actor", None)
        if cached is not None:
            return cached
        user = request.user if request.user.is_authenticated else None
        token = getattr(request, "api_token", None)
        read_only = token is not None and token.read_only
        scope = getattr(request, "instance_repos", None)
        actor = cls(user, can_write=not read_only and scope is None, instance_repos=scope,
                    can_write_volume=not read_only)
        request._hub_actor = actor
        return actor
