"""Routes of the Hugging Face Hub protocol. Revisions never contain '/' except the refs/... forms,
because WSGI servers decode %2F before Django sees the path."""
import re

from django.urls import re_path

from hub.accounts.middleware import accepts_api_tokens
from hub.hfapi import community, discussions, lfs, space, viewer, views, xet

NAME = r"(?P<ns>[A-Za-z0-9][A-Za-z0-9._-]*)/(?P<name>[A-Za-z0-9][A-Za-z0-9._-]*?)"
REV = r"(?P<rev>refs/(?:pr|convert|heads|tags)/[^/]+|[^/]+)"
API = r"^api/(?P<prefix>models|datasets)/" + NAME
FILE_PREFIX = r"^(?P<prefix>datasets/|)" + NAME
# What follows a repo id in the API's URLs.
ENDPOINTS = ["revision", "tree", "paths-info", "preupload", "commit", "commits", "refs", "branch", "tag",
             "settings", "auth-check", "duplicate", "super-squash", "lfs-files", "discussions", "xet-read-token",
             "xet-write-token", "user-access-request", "like", "likers"]
NUM = r"/discussions/(?P<num>[0-9]{1,9})"

urlpatterns = [
    re_path(r"^api/whoami-v2$", views.whoami),
    re_path(r"^api/validate-yaml$", views.validate_yaml),
    re_path(r"^api/settings/repositories$", space.repo_storage),
    re_path(r"^api/organizations/(?P<org>[A-Za-z0-9][A-Za-z0-9._-]*)/settings/repositories$", space.repo_storage),
    re_path(r"^api/repos/create$", views.create_repo),
    re_path(r"^api/repos/delete$", views.delete_repo),
    re_path(r"^api/repos/move$", views.move_repo),
    re_path(r"^api/(?P<prefix>models|datasets)$", views.list_repos),
    re_path(r"^api/users/(?P<username>[A-Za-z0-9][A-Za-z0-9._-]*)/likes$", community.user_likes),
    # X/like is both the repo X/like and the like route of the one-part id X: see the view.
    re_path(r"^api/(?P<prefix>models|datasets)/(?P<ns>[A-Za-z0-9][A-Za-z0-9._-]*)/(?P<name>"
            + "|".join(re.escape(e) for e in ENDPOINTS) + r")$", views.repo_info_or_no_namespace),
    re_path(API + r"$", views.repo_info),
    re_path(API + r"/revision/(?P<rev>.+)$", views.repo_info),
    re_path(API + r"/tree/" + REV + r"(?:/(?P<path>.*))?$", views.tree),
    re_path(API + r"/paths-info/" + REV + r"$", views.paths_info),
    re_path(API + r"/preupload/" + REV + r"$", views.preupload),
    re_path(API + r"/commit/" + REV + r"$", views.commit),
    re_path(API + r"/commits/" + REV + r"$", views.commits),
    re_path(API + r"/refs$", views.refs),
    re_path(API + r"/branch/(?P<branch>[^/]+)$", views.branch),
    re_path(API + r"/tag/" + REV + r"$", views.tag),
    re_path(API + r"/settings$", views.repo_settings),
    re_path(API + r"/auth-check(?:/(?P<write>write))?$", views.auth_check),
    re_path(API + r"/duplicate$", views.duplicate_repo),
    re_path(API + r"/super-squash/" + REV + r"$", space.super_squash),
    re_path(API + r"/lfs-files$", space.lfs_files),
    re_path(API + r"/lfs-files/batch$", space.lfs_files_delete),
    re_path(API + r"/xet-(?P<access>read|write)-token(?:/(?P<rev>.*))?$", xet.xet_token),
    re_path(API + r"/user-access-request/(?P<status>pending|accepted|rejected)$", community.access_requests),
    re_path(API + r"/user-access-request/handle$", community.handle_access_request),
    re_path(API + r"/user-access-request/grant$", community.grant_access),
    re_path(API + r"/like$", community.like),
    re_path(API + r"/likers$", community.likers),
    re_path(API + r"/discussions$", discussions.discussions_view),
    re_path(API + NUM + r"$", discussions.details),
    re_path(API + NUM + r"/comment$", discussions.comment),
    re_path(API + NUM + r"/comment/(?P<comment_id>[0-9A-Fa-f]{1,24})/edit$", discussions.edit_comment),
    re_path(API + NUM + r"/comment/(?P<comment_id>[0-9A-Fa-f]{1,24})/hide$", discussions.hide_comment),
    re_path(API + NUM + r"/title$", discussions.title),
    re_path(API + NUM + r"/status$", discussions.status),
    re_path(API + NUM + r"/merge$", discussions.merge),
    re_path(FILE_PREFIX + r"\.git/info/lfs/objects/batch$", lfs.lfs_batch),
    re_path(FILE_PREFIX + r"\.git/info/lfs/verify$", lfs.lfs_verify),
    re_path(FILE_PREFIX + r"/resolve/" + REV + r"/(?P<path>.+)$", views.resolve),
    re_path(r"^lfs/upload/(?P<token>[^/]+)$", lfs.lfs_upload),
    re_path(r"^lfs/part/(?P<token>[^/]+)$", lfs.lfs_part),
    re_path(r"^lfs/complete/(?P<token>[^/]+)$", lfs.lfs_complete),
    re_path(r"^lfs/objects/(?P<token>[^/]+)$", lfs.lfs_object),
    # Upstream's ids are namespace/name; a one-part id (`gpt2`, as old scripts spell upstream's
    # canonical models) names no repo here: RepoNotFound, so repo_exists/file_exists say False.
    re_path(r"^api/(?:models|datasets)/(?P<name>[^/]+)(?:/(?:" + "|".join(ENDPOINTS) + r")(?:/.*)?)?$",
            views.no_namespace),
    re_path(r"^(?:datasets/)?(?P<name>[A-Za-z0-9][A-Za-z0-9._-]*)/resolve/.+$", views.no_namespace),
    # The dataset viewer, as upstream's datasets-server API (README: "Dataset viewer").
    re_path(r"^api/datasets-server/is-valid$", viewer.is_valid),
    re_path(r"^api/datasets-server/splits$", viewer.splits),
    re_path(r"^api/datasets-server/first-rows$", viewer.first_rows),
    re_path(r"^api/datasets-server/rows$", viewer.rows),
    re_path(r"^api/datasets-server/info$", viewer.info),
    re_path(r"^api/datasets-server/size$", viewer.size),
    re_path(r"^api/(?P<path>(?s:.*))$", views.not_found),  # (?s): a newline in the path must not escape
]

# The protocol's routes, every one: API tokens open them (web pages and the admin take sessions only).
for _route in urlpatterns:
    accepts_api_tokens(_route.callback)

# The Xet CAS: its own bearer tokens (the access tokens the routes above hand out), not API tokens.
HASH = r"(?P<hash>[0-9A-Za-z]{1,100})"
urlpatterns += [
    re_path(r"^cas/v1/xorbs/(?P<prefix>[a-z-]+)/" + HASH + r"$", xet.xorb),
    re_path(r"^cas/v1/shards$", xet.shard_v1),
    re_path(r"^cas/v2/shards$", xet.shard_v2),
    re_path(r"^cas/v1/chunks/(?P<prefix>[a-z-]+)/" + HASH + r"$", xet.chunk),
    re_path(r"^cas/v1/reconstructions/" + HASH + r"$", xet.reconstruction_v1),
    re_path(r"^cas/v2/reconstructions/" + HASH + r"$", xet.reconstruction_v2),
    re_path(r"^cas/v1/telemetry$", xet.telemetry),
    re_path(r"^v1/telemetry$", xet.telemetry),  # (hf_xet sends it to the CAS host's root)
    re_path(r"^cas/fetch/(?P<token>[^/]+)$", xet.fetch),
]
