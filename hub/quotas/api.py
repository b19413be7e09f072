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
})


class QuotaView(APIView):
    permission_classes = [IsAuthenticated]

    @extend_schema(summary="Storage quota of the calling account",
                   parameters=[], responses={200: QuotaSchema, 401: OpenApiResponse(description="no valid token")})
    def get(self, request: Request) -> Response:
        namespace = request.query_params.get("namespace")
        ns = services.namespace_for(request.user, namespace)
        return Response(services.report(ns).as_dict())
