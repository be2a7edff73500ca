from django.urls import URLPattern, URLResolver, path, re_path
from drf_spectacular.views import SpectacularAPIView, SpectacularSwaggerSplitView

from benchhub.api import ingest_views, reference_views, root, views

urlpatterns: list[URLPattern | URLResolver] = [
    path("", root.ApiRootView.as_view(), name="api-root"),
    path("contributors/", ingest_views.ContributorsView.as_view(), name="contributors"),
    path("submissions/", views.SubmissionsView.as_view(), name="submissions"),
    path("submissions/<uuid:pk>/", views.SubmissionDetailView.as_view(), name="submission-detail"),
    path("submissions/<uuid:pk>/envelope", views.EnvelopeView.as_view(), name="api-submission-envelope"),
    path("submissions/<uuid:pk>/withdraw", ingest_views.WithdrawView.as_view(), name="submission-withdraw"),
    path("snapshot/", views.SnapshotView.as_view(), name="snapshot"),
    path("snapshot/index/", views.SnapshotIndexView.as_view(), name="snapshot-index"),
    path("leaderboard/", views.LeaderboardView.as_view(), name="leaderboard"),
    path("campaigns/", views.CampaignListView.as_view(), name="campaigns"),
    path("campaigns/<slug:slug>/", views.CampaignDetailView.as_view(), name="campaign-detail"),
    path("campaigns/<slug:slug>/versions/", views.CampaignVersionsView.as_view(), name="campaign-versions"),
    path("campaigns/<slug:slug>/patches/<str:name>", views.PatchFileView.as_view(), name="campaign-patch"),
    path("measurements/", views.MeasurementsView.as_view(), name="measurements"),
    path("measurements.csv", views.MeasurementsCsvView.as_view(), name="measurements-csv"),
    path("reference-rows/", reference_views.ReferenceRowsView.as_view(), name="reference-rows"),
    path("schema/", SpectacularAPIView.as_view(), name="api-schema"),
    # Swagger UI's split view: its script is a file of ours, as the CSP asks (Redoc loads its logo from a CDN).
    path("docs/", SpectacularSwaggerSplitView.as_view(url_name="api-schema"), name="api-docs"),
    # Last: JSON for what no route above takes (a malformed id, a typo), in DEBUG too.
    re_path(r"^submissions/(?P<pk>[^/]+)/", root.malformed_id),
    re_path(r"^(?P<rest>.*)$", root.no_such_endpoint),
]
