from django.urls import URLPattern, URLResolver, path
from drf_spectacular.views import SpectacularAPIView, SpectacularRedocView

from benchhub.api import ingest_views, views

urlpatterns: list[URLPattern | URLResolver] = [
    path("contributors/", ingest_views.ContributorsView.as_view(), name="contributors"),
    path("submissions/", views.SubmissionsView.as_view(), name="submissions"),
    path("submissions/<uuid:pk>/", views.SubmissionDetailView.as_view(), name="submission-detail"),
    path("submissions/<uuid:pk>/envelope", views.EnvelopeView.as_view(), name="api-submission-envelope"),
    path("submissions/<uuid:pk>/withdraw", ingest_views.WithdrawView.as_view(), name="submission-withdraw"),
    path("snapshot/", views.SnapshotView.as_view(), name="snapshot"),
    path("leaderboard/", views.LeaderboardView.as_view(), name="leaderboard"),
    path("campaigns/", views.CampaignListView.as_view(), name="campaigns"),
    path("campaigns/<slug:slug>/", views.CampaignDetailView.as_view(), name="campaign-detail"),
    path("campaigns/<slug:slug>/patches/<str:name>", views.PatchFileView.as_view(), name="campaign-patch"),
    path("measurements/", views.MeasurementsView.as_view(), name="measurements"),
    path("measurements.csv", views.MeasurementsCsvView.as_view(), name="measurements-csv"),
    path("schema/", SpectacularAPIView.as_view(), name="api-schema"),
    path("docs/", SpectacularRedocView.as_view(url_name="api-schema"), name="api-docs"),
]
