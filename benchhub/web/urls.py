from benchhub_protocol.schema import HANDLE_PATTERN
from django.urls import URLPattern, URLResolver, path, register_converter

from benchhub.web import about, campaign_versions, compare, views, wheel


class HandleConverter:
    """Only what a handle can be reaches the view: a NUL or a bidi control was a 500 in PostgreSQL."""

    regex = HANDLE_PATTERN.removeprefix("^").removesuffix("$")

    def to_python(self, value: str) -> str:
        return value

    def to_url(self, value: str) -> str:
        return value


register_converter(HandleConverter, "handle")

urlpatterns: list[URLPattern | URLResolver] = [
    path("", views.home, name="home"),
    path("campaigns/<slug:slug>/", campaign_versions.campaign, name="campaign"),
    path("chips/<slug:slug>/", views.chip, name="chip"),
    path("submissions/<uuid:pk>/", views.submission, name="submission"),
    path("submissions/<uuid:pk>/envelope.json", views.envelope_json, name="submission-envelope"),
    path("contributors/<handle:handle>/", views.contributor, name="contributor"),
    path("compare/", compare.compare, name="compare"),
    path("about/", about.about, name="about"),
    path("agent/<str:filename>", wheel.download, name="agent-wheel"),
]
