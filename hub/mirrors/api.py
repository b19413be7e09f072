"""The mirror API (/api/v1/mirrors...): thin DRF views over hub.mirrors.services.

* POST /api/v1/mirrors — start a job (202); GET /api/v1/mirrors?repo=NS/NAME&type=model — the
  jobs of a repo (without `repo`: your own; operators: all);
* GET /api/v1/mirrors/{id} — state, progress (files, bytes, rate, ETA), error, commits made;
* POST /api/v1/mirrors/{id}/retry — retry a failed job or re-run a finished one (202).

Errors are HubErrors: JSON {"error", "code"} plus X-Error-Code, as everywhere on the hub."""
from __future__ import annotations

from drf_spectacular.utils import OpenApiParameter, extend_schema
from rest_framework import serializers
from rest_framework.permissions import AllowAny
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from hub.accounts.actor import Actor
from hub.mirrors import services
from hub.mirrors.models import MirrorJob
from hub.repos.models import Repo
from hub.volumes.api import errors  # the hub's one error shape in the schema

TYPES = [Repo.MODEL, Repo.DATASET]


class MirrorRequestSerializer(serializers.Serializer):
    repo = serializers.CharField(max_length=200, help_text="NAMESPACE/NAME here; created as a public repo if missing")
    type = serializers.ChoiceField(TYPES, default=Repo.MODEL)
    source = serializers.CharField(required=False, allow_blank=True, default="", max_length=1000,
                                   help_text="https://… (a hub speaking the Hugging Face protocol; default "
                                             "HUB_MIRROR_UPSTREAM), s3://bucket/prefix, or /a/directory on the "
                                             "server (operators only)")
    source_repo = serializers.CharField(required=False, allow_blank=True, default="", max_length=200,
                                        help_text="the upstream repo id (default: the same as `repo`)")
    source_type = serializers.ChoiceField(TYPES, required=False, allow_blank=True, default="",
                                          help_text="the upstream repo type (default: `type`)")
    token = serializers.CharField(required=False, allow_blank=True, default="", write_only=True, max_length=1000,
                                  help_text="a token for the upstream hub (private or gated repos); never shown")
    revisions = serializers.ListField(child=serializers.CharField(max_length=200), required=False, default=list,
                                      max_length=100, help_text="branches and tags; default all of them")
    s3_endpoint_url = serializers.CharField(required=False, allow_blank=True, default="", max_length=500,
                                            help_text="S3-compatible endpoint (default: the workers' AWS_ENDPOINT_URL)")
    aws_access_key_id = serializers.CharField(required=False, allow_blank=True, default="", write_only=True,
                                              max_length=200)
    aws_secret_access_key = serializers.CharField(required=False, allow_blank=True, default="", write_only=True,
                                                  max_length=200)
    max_rate = serializers.IntegerField(required=False, allow_null=True, default=None, min_value=1, max_value=2**53,
                                        help_text="bytes per second over all files (default: unlimited)")


class SourceSerializer(serializers.Serializer):
    kind = serializers.ChoiceField([k for k, _ in MirrorJob.KINDS])
    url = serializers.CharField()
    repo = serializers.CharField(allow_null=True)
    type = serializers.CharField(allow_null=True)
    display = serializers.CharField()
    endpoint_url = serializers.CharField(allow_null=True)


class CountsSerializer(serializers.Serializer):
    total = serializers.IntegerField()
    done = serializers.IntegerField(help_text="stored, fetched or found stored already")
    skipped = serializers.IntegerField(help_text="found stored already: nothing fetched")


class BytesSerializer(CountsSerializer):
    fetched = serializers.IntegerField(help_text="came over the network")
    resumed = serializers.IntegerField(help_text="kept from partial downloads of an interrupted attempt")


class CommitSerializer(serializers.Serializer):
    name = serializers.CharField(help_text="branch or tag")
    kind = serializers.ChoiceField(["branch", "tag"])
    upstream = serializers.CharField(help_text="upstream commit id (or a digest of an S3/directory listing)")
    commit = serializers.CharField(help_text="the commit here")


class MirrorJobSerializer(serializers.Serializer):
    id = serializers.IntegerField()
    repo = serializers.CharField()
    type = serializers.ChoiceField(TYPES)
    source = SourceSerializer()
    revisions = serializers.ListField(child=serializers.CharField())
    state = serializers.ChoiceField([s for s, _ in MirrorJob.STATES])
    error = serializers.CharField(allow_null=True, help_text="why the job failed, or the last transient failure")
    notes = serializers.CharField(allow_null=True, help_text="files or refs skipped, and why")
    attempts = serializers.IntegerField()
    files = CountsSerializer()
    bytes = BytesSerializer()
    percent = serializers.FloatField()
    rate = serializers.FloatField(help_text="bytes per second, recent (0 unless running)")
    eta_seconds = serializers.IntegerField(allow_null=True)
    elapsed_seconds = serializers.FloatField(allow_null=True)
    max_rate = serializers.IntegerField(allow_null=True)
    commits = CommitSerializer(many=True)
    created_by = serializers.CharField(allow_null=True)
    created = serializers.DateTimeField()
    started = serializers.DateTimeField(allow_null=True)
    updated = serializers.DateTimeField(allow_null=True)
    finished = serializers.DateTimeField(allow_null=True)


def _actor(request: Request) -> Actor:
    return Actor.from_request(request._request)


class MirrorsView(APIView):
    permission_classes = [AllowAny]  # the services decide, in the hub's error vocabulary

    @extend_schema(operation_id="mirrors_list", summary="Mirror jobs of a repo (or your own)",
                   parameters=[OpenApiParameter("repo", str, description="NAMESPACE/NAME; omit for your own jobs"),
                               OpenApiParameter("type", str, enum=TYPES, description="default model")],
                   responses={200: MirrorJobSerializer(many=True), **errors(400, 401, 404)})
    def get(self, request: Request) -> Response:
        repo_id = request.query_params.get("repo")
        if repo_id:
            jobs = services.jobs_of_repo(_actor(request), request.query_params.get("type") or Repo.MODEL, repo_id)
        else:
            jobs = services.jobs_of(_actor(request))
        return Response([services.job_progress(j) for j in jobs])

    @extend_schema(operation_id="mirrors_create", summary="Start mirroring a repo",
                   description="Creates the target repo (public) and, for operators, its namespace if missing, "
                               "and queues the job. Users may mirror into namespaces they can write, from a hub "
                               "or from S3 with credentials of their own.",
                   request=MirrorRequestSerializer,
                   responses={202: MirrorJobSerializer, **errors(400, 401, 403, 404, 409)})
    def post(self, request: Request) -> Response:
        ser = MirrorRequestSerializer(data=request.data)
        ser.is_valid(raise_exception=True)
        d = ser.validated_data
        job = services.check_create_job(
            _actor(request), d["repo"], repo_type=d["type"], source=d["source"] or None, source_repo=d["source_repo"],
            source_type=d["source_type"], token=d["token"], revisions=d["revisions"],
            s3_endpoint_url=d["s3_endpoint_url"], max_rate=d["max_rate"],
            s3_credentials={"aws_access_key_id": d["aws_access_key_id"],
                            "aws_secret_access_key": d["aws_secret_access_key"]})
        return Response(services.job_progress(job), status=202)


class MirrorView(APIView):
    permission_classes = [AllowAny]

    @extend_schema(operation_id="mirrors_get", summary="A mirror job: state, progress, error, commits",
                   responses={200: MirrorJobSerializer, **errors(404)})
    def get(self, request: Request, job_id: int) -> Response:
        return Response(services.job_progress(services.access_job(_actor(request), job_id)))


class MirrorRetryView(APIView):
    permission_classes = [AllowAny]

    @extend_schema(operation_id="mirrors_retry", summary="Retry a failed job, or re-run a finished one",
                   description="Files already stored are skipped and partial downloads continue. 409 while "
                               "the job runs.", request=None,
                   responses={202: MirrorJobSerializer, **errors(401, 403, 404, 409)})
    def post(self, request: Request, job_id: int) -> Response:
        actor = _actor(request)
        job = services.check_retry(actor, services.access_job(actor, job_id))
        return Response(services.job_progress(job), status=202)
