"""Routes of the native volume API, mounted at /api/volume/."""
from django.urls import re_path

from hub.volumes import api

UPLOAD = r"^uploads/(?P<upload_id>[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12})"

urlpatterns = [
    re_path(r"^ls$", api.ListView.as_view(), name="volume-ls"),
    re_path(r"^stat$", api.StatView.as_view(), name="volume-stat"),
    re_path(r"^mkdir$", api.MkdirView.as_view(), name="volume-mkdir"),
    re_path(r"^move$", api.MoveView.as_view(), name="volume-move"),
    re_path(r"^files/(?P<path>(?s:.*))$", api.FileView.as_view(), name="volume-file"),
    re_path(r"^uploads$", api.UploadsView.as_view(), name="volume-uploads"),
    re_path(UPLOAD + r"$", api.UploadView.as_view(), name="volume-upload"),
    re_path(UPLOAD + r"/complete$", api.UploadCompleteView.as_view(), name="volume-upload-complete"),
    re_path(UPLOAD + r"/parts$", api.UploadCheckedPartsView.as_view(), name="volume-upload-checked-parts"),
    re_path(UPLOAD + r"/parts/(?P<number>[0-9]{1,5})$", api.UploadPartView.as_view(), name="volume-upload-part"),
]
