"""Routes of the Hugging Face Hub protocol. Revisions never contain '/' except the refs/... forms,
because WSGI servers decode %2F before Django sees the path."""
from django.urls import re_path

from hub.accounts.middleware import accepts_api_tokens
from hub.hfapi import discussions, views

NAME = r"(?P<ns>[A-Za-z0-9][A-Za-z0-9._-]*)/(?P<name>[A-Za-z0-9][A-Za-z0-9._-]*?)"
REV = r"(?P<rev>refs/(?:pr|convert|heads|tags)/[^/]+|[^/]+)"
API = r"^api/(?P<prefix>models|datasets)/" + NAME
FILE_PREFIX = r"^(?P<prefix>datasets/|)" + NAME
NUM = r"/discussions/(?P<num>[0-9]{1,9})"

urlpatterns = [
    re_path(r"^api/whoami-v2$", views.whoami),
    re_path(r"^api/validate-yaml$", views.validate_yaml),
    re_path(r"^api/repos/create$", views.create_repo),
    re_path(r"^api/repos/delete$", views.delete_repo),
    re_path(r"^api/repos/move$", views.move_repo),
    re_path(r"^api/(?P<prefix>models|datasets)$", views.list_repos),
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
    re_path(API + r"/xet-(?:read|write)-token/.*$", views.xet_token),
    re_path(API + r"/discussions$", discussions.discussions_view),
    re_path(API + NUM + r"$", discussions.details),
    re_path(API + NUM + r"/comment$", discussions.comment),
    re_path(API + NUM + r"/comment/(?P<comment_id>[0-9A-Fa-f]{1,24})/edit$", discussions.edit_comment),
    re_path(API + NUM + r"/comment/(?P<comment_id>[0-9A-Fa-f]{1,24})/hide$", discussions.hide_comment),
    re_path(API + NUM + r"/title$", discussions.title),
    re_path(API + NUM + r"/status$", discussions.status),
    re_path(API + NUM + r"/merge$", discussions.merge),
    re_path(FILE_PREFIX + r"\.git/info/lfs/objects/batch$", views.lfs_batch),
    re_path(FILE_PREFIX + r"\.git/info/lfs/verify$", views.lfs_verify),
    re_path(FILE_PREFIX + r"/resolve/" + REV + r"/(?P<path>.+)$", views.resolve),
    re_path(r"^lfs/upload/(?P<token>[^/]+)$", views.lfs_upload),
    re_path(r"^lfs/part/(?P<token>[^/]+)$", views.lfs_part),
    re_path(r"^lfs/complete/(?P<token>[^/]+)$", views.lfs_complete),
    re_path(r"^lfs/objects/(?P<token>[^/]+)$", views.lfs_object),
    re_path(r"^api/(?P<path>(?s:.*))$", views.not_found),  # (?s): a newline in the path must not escape
]

# The protocol's routes, every one: API tokens open them (web pages and the admin take sessions only).
for _route in urlpatterns:
    accepts_api_tokens(_route.callback)
