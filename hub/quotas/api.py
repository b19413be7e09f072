"""GET /api/quota: the caller's limit, usage, reservations and largest consumers."""
from __future__ import annotations

from drf_spectacular.utils import OpenApiResponse, extend_schema, inline_serializer
from rest_framework import serializers
from rest_framework.permissions import IsAuthenticated
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from hub.quotas import services

QuotaSchema = inline_serializer("Quota", {
    "namespace": serializers.CharField(),
    "limit": serializers.IntegerField(),
    "used": serializers.IntegerField(),
    "reserved": serializers.IntegerField(),
    "available": serializers.IntegerField(),
    "limit_human": serializers.CharField(),
    "used_human": serializers.CharField(),
    "largest_consumers": serializers.ListField(child=serializers.DictField()),
    "reservations": serializers.ListField(child=inline_serializer("Reservation", {
        "bytes": serializers.IntegerField(help_text="reserved"),
        "what": serializers.CharField(help_text="what for: the volume path, or the repo (and path), an upload "
                                      "goes to"),
        "upload": serializers.CharField(allow_null=True, help_text="the upload session holding it: its owner "
                                        "gives the bytes back by ending it (DELETE the session)"),
        "kind": serializers.ChoiceField(["lfs", "volume"], allow_null=True, help_text="DELETE /api/v1/uploads/"
                                        "{upload} (lfs) or /api/volume/uploads/{upload} (volume)"),
        "user": serializers.CharField(allow_null=True, help_text="who holds it"),
        "created": serializers.DateTimeField(),
        "expires": serializers.DateTimeField(help_text="when it lapses and its bytes are given back"),
    }), help_text="what makes up `reserved`, largest first (up to 100)"),
})


class QuotaView(APIView):
    permission_classes = [IsAuthenticated]

    @extend_schema(summary="Storage quota of the calling account",
                   parameters=[], responses={200: QuotaSchema, 401: OpenApiResponse(description="no valid token")})
    def get(self, request: Request) -> Response:
        namespace = request.query_params.get("namespace")
        ns = services.namespace_for(request.user, namespace)
        return Response(services.report(ns).as_dict())
