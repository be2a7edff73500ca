from django.urls import URLPattern, URLResolver, path

from benchhub.web import compare, views, wheel

urlpatterns: list[URLPattern | URLResolver] = [
    path("", views.home, name="home"),
    path("chips/<slug:slug>/", views.chip, name="chip"),
    path("submissions/<uuid:pk>/", views.submission, name="submission"),
    path("submissions/<uuid:pk>/envelope.json", views.submission_envelope, name="submission-envelope"),
    path("contributors/<str:handle>/", views.contributor, name="contributor"),
    path("compare/", compare.compare, name="compare"),
    path("about/", views.about, name="about"),
    path("agent/<str:filename>", wheel.download, name="agent-wheel"),
]
