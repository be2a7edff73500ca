from django.contrib import admin
from django.urls import include, path

urlpatterns = [
    path("admin/", admin.site.urls),
    path("api/v1/", include("benchhub.api.urls")),
    path("", include("benchhub.web.urls")),
]

handler400 = "benchhub.api.errors.bad_request"
handler403 = "benchhub.api.errors.permission_denied"
handler404 = "benchhub.api.errors.not_found"
handler500 = "benchhub.api.errors.server_error"
