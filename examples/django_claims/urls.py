"""The example's URLs (``ROOT_URLCONF = "django_claims.urls"``)."""

from django.urls import path

from django_claims.views import create_claim

urlpatterns = [path("claims", create_claim)]
