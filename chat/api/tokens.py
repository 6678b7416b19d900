"""The caller's API token: revoked by its owner (a password change revokes it too,
chat/accounts.py).

DELETE /agents-api/token   the caller's token is deleted (204). Made from a logged-in
                           browser session (the owner's password was typed), not with a
                           token: what revokes a leaked token is its owner's login.
"""

from django.urls import path
from drf_spectacular.utils import OpenApiResponse, extend_schema
from rest_framework import status
from rest_framework.authentication import SessionAuthentication
from rest_framework.authtoken.models import Token
from rest_framework.decorators import api_view, authentication_classes
from rest_framework.request import Request
from rest_framework.response import Response


@extend_schema(
    request=None,
    responses={204: OpenApiResponse(description="Your token is revoked (or you had none).")},
)
@api_view(["DELETE"])
@authentication_classes([SessionAuthentication])
def revoke_token(request: Request) -> Response:
    Token.objects.filter(user=request.user).delete()
    return Response(status=status.HTTP_204_NO_CONTENT)


urlpatterns = [path("token", revoke_token, name="api-token-revoke")]
